#pragma once

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tern/base/result.h"
#include "tern/tls/tls_context.h"

namespace tern::tls::detail {

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const noexcept { SSL_CTX_free(ctx); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

struct SessionFree {
  void operator()(SSL_SESSION* session) const noexcept { SSL_SESSION_free(session); }
};
using SessionPtr = std::unique_ptr<SSL_SESSION, SessionFree>;

// One load of a context's certificates: an SSL_CTX per certificate (the first is the default,
// the others are picked by SNI). Immutable once built; a stream keeps the generation it was
// made from alive, so reload() never touches a live connection's settings.
struct Generation {
  std::vector<SslCtxPtr> contexts;
  std::uint64_t number = 0;
  std::string file_stamps;  // the files it was loaded from, as file_stamps() saw them
};

// What a TlsContext handle shares.
struct ContextState {
  bool server = false;
  ServerConfig server_config;
  ClientConfig client_config;
  // Session ticket keys, made once so that tickets survive reload() and SNI switches.
  std::array<unsigned char, 80> ticket_keys{};

  // Any thread: the current generation.
  std::shared_ptr<const Generation> current() const;
  void publish(std::shared_ptr<const Generation> generation);

  // The client's last session per server name (ClientConfig::session_resumption): a copy of
  // it for one connection to offer, or null. Any thread.
  SessionPtr session(const std::string& server_name) const;
  // Keeps `session` (takes the caller's reference) as the one to resume. Any thread.
  void keep_session(const std::string& server_name, SSL_SESSION* session);
  // Held by reload(), which changes the certificates of the configs above.
  std::mutex reload_mutex;
  // ALPN protocols in wire format (length-prefixed), from the config.
  std::string alpn_wire;

 private:
  mutable std::mutex mutex_;  // never held across a wait
  std::shared_ptr<const Generation> generation_;
  std::map<std::string, SessionPtr> sessions_;
};

// What an SSL object's callbacks need to know about it (SSL ex_data, set by the stream).
struct SslLink {
  ContextState* state = nullptr;
  std::string session_key;     // the server name a client connected to
  bool renegotiation = false;  // a TLS 1.2 client asked for a new handshake (refused)
};

// The ex_data index of an SSL's SslLink. Any thread.
int link_index();

// A new SSL for a stream of `state`, from its current generation (kept in `generation`).
Result<SSL*> new_ssl(ContextState& state, std::shared_ptr<const Generation>& generation);

}  // namespace tern::tls::detail
