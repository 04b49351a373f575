#include "tern/tls/tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <utility>

#include "context_state.h"
#include "openssl_error.h"

namespace tern::tls {

namespace detail {

std::shared_ptr<const Generation> ContextState::current() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

void ContextState::publish(std::shared_ptr<const Generation> generation) {
  std::shared_ptr<const Generation> old;
  std::lock_guard lock(mutex_);
  old = std::exchange(generation_, std::move(generation));
}

SessionPtr ContextState::session(const std::string& server_name) const {
  SessionPtr kept;
  {
    std::lock_guard lock(mutex_);
    auto found = sessions_.find(server_name);
    if (found == sessions_.end()) return nullptr;
    SSL_SESSION_up_ref(found->second.get());
    kept.reset(found->second.get());
  }
  // A TLS 1.3 client that resumed a session marks that object used up when its handshake ends
  // (OpenSSL's single-use tickets), which would turn every connection still about to offer the
  // same object, and the next ones until a new ticket comes, into full handshakes.
  return SessionPtr(SSL_SESSION_dup(kept.get()));
}

void ContextState::keep_session(const std::string& server_name, SSL_SESSION* session) {
  SessionPtr kept(session);
  std::lock_guard lock(mutex_);
  std::swap(sessions_[server_name], kept);
}

int link_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

}  // namespace detail

namespace {

using detail::ContextState;
using detail::Generation;
using detail::SslCtxPtr;

struct BioFree {
  void operator()(BIO* bio) const noexcept { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

std::unexpected<std::error_code> config_error(const std::string& what) {
  return fail(detail::tls_error(TlsErrc::config, what, detail::drain_openssl_errors()));
}

BioPtr memory_bio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

Result<void> load_certificate(SSL_CTX* ctx, const Certificate& certificate) {
  if (!certificate.chain_pem.empty()) {
    BioPtr bio = memory_bio(certificate.chain_pem);
    X509* leaf = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (leaf == nullptr) return config_error("certificate chain (PEM text)");
    const int used = SSL_CTX_use_certificate(ctx, leaf);
    X509_free(leaf);
    if (used != 1) return config_error("certificate chain (PEM text)");
    while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
        X509_free(extra);
        return config_error("certificate chain (PEM text)");
      }
    }
    ERR_clear_error();  // the end of the PEM text
  } else if (SSL_CTX_use_certificate_chain_file(ctx, certificate.chain_file.c_str()) != 1) {
    return config_error("certificate chain " + certificate.chain_file);
  }
  if (!certificate.key_pem.empty()) {
    BioPtr bio = memory_bio(certificate.key_pem);
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
    if (key == nullptr) return config_error("private key (PEM text)");
    const int used = SSL_CTX_use_PrivateKey(ctx, key);
    EVP_PKEY_free(key);
    if (used != 1) return config_error("private key (PEM text)");
  } else if (SSL_CTX_use_PrivateKey_file(ctx, certificate.key_file.c_str(), SSL_FILETYPE_PEM) !=
             1) {
    return config_error("private key " + certificate.key_file);
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    return config_error("private key does not match certificate " +
                        (certificate.chain_file.empty() ? "(PEM text)" : certificate.chain_file));
  return {};
}

// Decodes and caches the extensions of every certificate the context trusts, now, while one
// thread owns the context. OpenSSL would cache them in the first handshake that verifies a peer,
// and later handshakes on other threads skip its lock through an atomic flag that
// ThreadSanitizer cannot see in an uninstrumented libcrypto: every program verifying on two
// threads reported a race there. The first handshake also no longer pays for the decoding.
void cache_trusted_extensions(SSL_CTX* ctx) {
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
  for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
    if (X509* cert = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i)))
      X509_check_purpose(cert, -1, 0);
  }
}

Result<void> load_trust(SSL_CTX* ctx, const std::string& file, const std::string& pem,
                        bool default_paths) {
  if (!pem.empty()) {
    BioPtr bio = memory_bio(pem);
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    int added = 0;
    while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      const int ok = X509_STORE_add_cert(store, ca);
      X509_free(ca);
      if (ok != 1) return config_error("CA bundle (PEM text)");
      ++added;
    }
    ERR_clear_error();
    if (added == 0)
      return fail(
          detail::tls_error(TlsErrc::config, "CA bundle (PEM text)", "no certificate in it"));
  } else if (!file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, file.c_str(), nullptr) != 1)
      return config_error("CA bundle " + file);
  } else if (default_paths && SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return config_error("the system's CA bundle");
  }
  cache_trusted_extensions(ctx);
  return {};
}

// Builds the chain sent after the leaf once, from the context's trust store, when the
// certificate file held only the leaf: OpenSSL would otherwise build it through
// X509_verify_cert in every full handshake (13,000 instructions). The chain is the one those
// handshakes would have sent (the CA certificates the store holds, none for a self-signed
// leaf); a chain given with the leaf is left as it is.
Result<void> build_chain_once(SSL_CTX* ctx) {
  STACK_OF(X509)* given = nullptr;
  if (SSL_CTX_get0_chain_certs(ctx, &given) == 1 && given != nullptr && sk_X509_num(given) > 0)
    return {};
  if (SSL_CTX_build_cert_chain(
          ctx, SSL_BUILD_CHAIN_FLAG_IGNORE_ERROR | SSL_BUILD_CHAIN_FLAG_CLEAR_ERROR) == 0)
    return config_error("certificate chain");
  ERR_clear_error();  // a chain that does not verify is sent as the handshakes would send it
  return {};
}

int min_version(TlsVersion version) {
  return version == TlsVersion::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

// TLS 1.3 suites, most preferred first: AES-128-GCM with SHA-256 (OpenSSL 3.0 puts AES-256-GCM
// with SHA-384 first), as Go and BoringSSL choose on CPUs with AES instructions: 10 AES rounds a
// block instead of 14, and a key schedule on HMAC-SHA-256 (docs/tls.md has the counts).
constexpr const char* kTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// What server and client contexts share: the lowest version, the suites above, and no
// renegotiation. OpenSSL keeps each connection's record buffers (no SSL_MODE_RELEASE_BUFFERS):
// about 34 KiB a connection, instead of a free and a malloc of 17 KiB around every record.
Result<void> set_common_options(SSL_CTX* ctx, TlsVersion min) {
  SSL_CTX_set_min_proto_version(ctx, min_version(min));
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_set_ciphersuites(ctx, kTls13Suites) != 1) return config_error("TLS 1.3 suites");
  return {};
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* out_length,
                const unsigned char* offered, unsigned int offered_length, void* arg) {
  const std::string& ours = static_cast<ContextState*>(arg)->alpn_wire;
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_length,
                            reinterpret_cast<const unsigned char*>(ours.data()),
                            static_cast<unsigned int>(ours.size()), offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no protocol in common (RFC 7301)
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

int select_certificate(SSL* ssl, int*, void* arg) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) return SSL_TLSEXT_ERR_OK;
  const auto* generation = static_cast<const Generation*>(arg);
  for (const SslCtxPtr& ctx : generation->contexts) {
    X509* certificate = SSL_CTX_get0_certificate(ctx.get());
    if (certificate != nullptr && X509_check_host(certificate, name, 0, 0, nullptr) == 1) {
      if (ctx.get() != SSL_get_SSL_CTX(ssl)) SSL_set_SSL_CTX(ssl, ctx.get());
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_OK;  // no match: the default certificate
}

int keep_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* link = static_cast<detail::SslLink*>(SSL_get_ex_data(ssl, detail::link_index()));
  if (link == nullptr || link->state == nullptr) return 0;
  link->state->keep_session(link->session_key, session);
  return 1;  // the reference is ours
}

// Notes a TLS 1.2 client's request for a new handshake: OpenSSL refuses it with a
// no_renegotiation warning alert and would carry on; the stream ends the connection instead.
void watch_renegotiation(int write_p, int, int content_type, const void* buf, std::size_t len,
                         SSL* ssl, void*) {
  if (write_p == 0 || content_type != SSL3_RT_ALERT || len < 2 ||
      static_cast<const unsigned char*>(buf)[1] != SSL_AD_NO_RENEGOTIATION)
    return;
  if (auto* link = static_cast<detail::SslLink*>(SSL_get_ex_data(ssl, detail::link_index())))
    link->renegotiation = true;
}

Result<SslCtxPtr> server_ctx(ContextState& state, const Certificate& certificate) {
  const ServerConfig& config = state.server_config;
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return config_error("SSL_CTX_new");
  if (Result<void> set = set_common_options(ctx.get(), config.min_version); !set)
    return fail(set.error());
  SSL_CTX_set_options(ctx.get(), SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_msg_callback(ctx.get(), watch_renegotiation);
  if (Result<void> loaded = load_certificate(ctx.get(), certificate); !loaded)
    return fail(loaded.error());
  if (config.client_auth != ClientAuth::none) {
    if (config.ca_file.empty() && config.ca_pem.empty())
      return fail(detail::tls_error(TlsErrc::config, "client certificates",
                                    "a CA bundle (ca_file or ca_pem) is needed to verify them"));
    if (Result<void> trust = load_trust(ctx.get(), config.ca_file, config.ca_pem, false); !trust)
      return fail(trust.error());
    SSL_CTX_set_verify(ctx.get(),
                       config.client_auth == ClientAuth::require
                           ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                           : SSL_VERIFY_PEER,
                       nullptr);
  }
  if (Result<void> chain = build_chain_once(ctx.get()); !chain) return fail(chain.error());
  static const unsigned char kSessionContext[] = "tern";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);
  if (config.session_tickets) {
    SSL_CTX_set_tlsext_ticket_keys(ctx.get(), state.ticket_keys.data(), state.ticket_keys.size());
    // Tickets carry the whole session: one per handshake (OpenSSL sends two by default, each
    // encrypted on the handshake's CPU), and no server-side copy of every session to look up,
    // lock and sweep.
    SSL_CTX_set_num_tickets(ctx.get(), 1);
    SSL_CTX_set_session_cache_mode(ctx.get(),
                                   SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  } else {
    SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx.get(), 0);
  }
  if (!state.alpn_wire.empty()) SSL_CTX_set_alpn_select_cb(ctx.get(), select_alpn, &state);
  return ctx;
}

Result<SslCtxPtr> client_ctx(ContextState& state) {
  const ClientConfig& config = state.client_config;
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return config_error("SSL_CTX_new");
  if (Result<void> set = set_common_options(ctx.get(), config.min_version); !set)
    return fail(set.error());
  if (config.verify_peer) {
    if (Result<void> trust = load_trust(ctx.get(), config.ca_file, config.ca_pem, true); !trust)
      return fail(trust.error());
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  }
  if (config.certificate.size() > 1)
    return fail(detail::tls_error(TlsErrc::config, "client certificate",
                                  "a client has at most one certificate"));
  if (!config.certificate.empty()) {
    if (Result<void> loaded = load_certificate(ctx.get(), config.certificate.front()); !loaded)
      return fail(loaded.error());
    if (Result<void> chain = build_chain_once(ctx.get()); !chain) return fail(chain.error());
  }
  if (!state.alpn_wire.empty() &&
      SSL_CTX_set_alpn_protos(ctx.get(),
                              reinterpret_cast<const unsigned char*>(state.alpn_wire.data()),
                              static_cast<unsigned int>(state.alpn_wire.size())) != 0)
    return config_error("ALPN protocols");
  if (config.session_resumption) {
    SSL_CTX_set_session_cache_mode(ctx.get(),
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx.get(), keep_new_session);
  } else {
    SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET);
  }
  return ctx;
}

// What the state's files look like now (path, size, modification time and inode of each), to
// tell whether any changed.
std::string file_stamps(const ContextState& state) {
  std::vector<std::string> paths;
  auto add = [&paths](const Certificate& certificate) {
    if (certificate.chain_pem.empty()) paths.push_back(certificate.chain_file);
    if (certificate.key_pem.empty()) paths.push_back(certificate.key_file);
  };
  if (state.server) {
    for (const Certificate& certificate : state.server_config.certificates) add(certificate);
    if (state.server_config.ca_pem.empty()) paths.push_back(state.server_config.ca_file);
  } else {
    for (const Certificate& certificate : state.client_config.certificate) add(certificate);
    if (state.client_config.ca_pem.empty()) paths.push_back(state.client_config.ca_file);
  }
  std::string stamps;
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    struct stat info = {};
    stamps += path;
    if (::stat(path.c_str(), &info) == 0) {
      stamps += ' ' + std::to_string(info.st_size) + ' ' + std::to_string(info.st_mtim.tv_sec) +
                '.' + std::to_string(info.st_mtim.tv_nsec) + ' ' + std::to_string(info.st_ino);
    }
    stamps += '\n';
  }
  return stamps;
}

// Builds a generation from the state's config; the previous one's number + 1.
Result<std::shared_ptr<const Generation>> build(ContextState& state, std::uint64_t number) {
  ERR_clear_error();
  auto generation = std::make_shared<Generation>();
  generation->number = number;
  generation->file_stamps = file_stamps(state);
  if (state.server) {
    if (state.server_config.certificates.empty())
      return fail(detail::tls_error(TlsErrc::config, "server context", "no certificate given"));
    for (const Certificate& certificate : state.server_config.certificates) {
      Result<SslCtxPtr> ctx = server_ctx(state, certificate);
      if (!ctx) return fail(ctx.error());
      generation->contexts.push_back(std::move(*ctx));
    }
    if (generation->contexts.size() > 1) {
      SSL_CTX* first = generation->contexts.front().get();
      SSL_CTX_set_tlsext_servername_callback(first, select_certificate);
      SSL_CTX_set_tlsext_servername_arg(first, generation.get());
    }
  } else {
    Result<SslCtxPtr> ctx = client_ctx(state);
    if (!ctx) return fail(ctx.error());
    generation->contexts.push_back(std::move(*ctx));
  }
  return std::shared_ptr<const Generation>(std::move(generation));
}

std::string make_alpn_wire(const std::vector<std::string>& protocols, bool& ok) {
  std::string wire;
  ok = true;
  for (const std::string& protocol : protocols) {
    if (protocol.empty() || protocol.size() > 255) ok = false;
    wire += static_cast<char>(protocol.size());
    wire += protocol;
  }
  return wire;
}

}  // namespace

Result<TlsContext> TlsContext::make(std::shared_ptr<detail::ContextState> state,
                                    const std::vector<std::string>& alpn) {
  bool ok = false;
  state->alpn_wire = make_alpn_wire(alpn, ok);
  if (!ok)
    return fail(detail::tls_error(TlsErrc::config, "ALPN protocols",
                                  "each name must be 1 to 255 bytes long"));
  if (RAND_bytes(state->ticket_keys.data(), static_cast<int>(state->ticket_keys.size())) != 1)
    return config_error("session ticket keys");
  Result<std::shared_ptr<const Generation>> generation = build(*state, 1);
  if (!generation) return fail(generation.error());
  state->publish(std::move(*generation));
  return TlsContext(std::move(state));
}

namespace detail {

Result<SSL*> new_ssl(ContextState& state, std::shared_ptr<const Generation>& generation) {
  generation = state.current();
  ERR_clear_error();
  SSL* ssl = SSL_new(generation->contexts.front().get());
  if (ssl == nullptr) return config_error("SSL_new");
  return ssl;
}

}  // namespace detail

Result<TlsContext> TlsContext::server(ServerConfig config) {
  auto state = std::make_shared<ContextState>();
  state->server = true;
  state->server_config = std::move(config);
  return make(state, state->server_config.alpn);
}

Result<TlsContext> TlsContext::client(ClientConfig config) {
  auto state = std::make_shared<ContextState>();
  state->client_config = std::move(config);
  return make(state, state->client_config.alpn);
}

Result<void> TlsContext::reload() {
  if (!state_) return fail(make_error_code(TlsErrc::closed));
  std::lock_guard lock(state_->reload_mutex);
  return reload_locked();
}

Result<void> TlsContext::reload_locked() {
  Result<std::shared_ptr<const Generation>> generation =
      build(*state_, state_->current()->number + 1);
  if (!generation) return fail(generation.error());
  state_->publish(std::move(*generation));
  return {};
}

Result<void> TlsContext::reload(std::vector<Certificate> certificates) {
  if (!state_) return fail(make_error_code(TlsErrc::closed));
  std::lock_guard lock(state_->reload_mutex);
  // Built from a copy of the state, so a failure leaves the context as it was.
  ContextState trial;
  trial.server = state_->server;
  trial.server_config = state_->server_config;
  trial.client_config = state_->client_config;
  trial.ticket_keys = state_->ticket_keys;
  trial.alpn_wire = state_->alpn_wire;
  if (trial.server) {
    trial.server_config.certificates = certificates;
  } else {
    trial.client_config.certificate = certificates;
  }
  if (Result<std::shared_ptr<const Generation>> checked = build(trial, 0); !checked)
    return fail(checked.error());
  if (state_->server) {
    state_->server_config.certificates = std::move(certificates);
  } else {
    state_->client_config.certificate = std::move(certificates);
  }
  return reload_locked();
}

Result<bool> TlsContext::reload_if_changed() {
  if (!state_) return fail(make_error_code(TlsErrc::closed));
  std::lock_guard lock(state_->reload_mutex);
  if (file_stamps(*state_) == state_->current()->file_stamps) return false;
  if (Result<void> reloaded = reload_locked(); !reloaded) return fail(reloaded.error());
  return true;
}

bool TlsContext::is_server() const noexcept { return state_ != nullptr && state_->server; }

std::uint64_t TlsContext::generation() const noexcept {
  return state_ ? state_->current()->number : 0;
}

}  // namespace tern::tls
