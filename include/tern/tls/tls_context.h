#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tern/base/result.h"

namespace tern::tls {

namespace detail {
struct ContextState;
}

// A certificate chain (leaf first) and its private key, from PEM files or PEM text in memory.
// Files are read again by TlsContext::reload().
struct Certificate {
  std::string chain_file;  // PEM file: the leaf certificate, then its intermediates
  std::string key_file;    // PEM file: the private key
  std::string chain_pem;   // used instead of chain_file when not empty
  std::string key_pem;     // used instead of key_file when not empty

  // A certificate read from files. Any thread.
  static Certificate files(std::string chain, std::string key) {
    return {std::move(chain), std::move(key), {}, {}};
  }
  // A certificate given as PEM text. Any thread.
  static Certificate pem(std::string chain, std::string key) {
    return {{}, {}, std::move(chain), std::move(key)};
  }
};

// Whether a server asks its clients for a certificate.
enum class ClientAuth {
  none,     // never asks
  request,  // asks; a client without one is let in, a client with a bad one is refused
  require,  // asks and refuses a client without a valid certificate (mutual TLS)
};

// The lowest protocol version a context accepts; TLS 1.3 is always preferred.
enum class TlsVersion { tls1_2, tls1_3 };

// How a server context is set up.
struct ServerConfig {
  // The first is served by default; another is chosen when the client's server name (SNI)
  // matches one of its names (subject alternative names, or the common name). At least one.
  std::vector<Certificate> certificates;
  std::string ca_file;  // CA bundle (PEM file) that client certificates must chain to
  std::string ca_pem;   // the same as PEM text, used when not empty
  ClientAuth client_auth = ClientAuth::none;
  std::vector<std::string> alpn;  // protocols offered, most preferred first (empty: no ALPN)
  TlsVersion min_version = TlsVersion::tls1_2;
  bool session_tickets = true;  // resumption by stateless tickets (keys survive reload())
  // Whether a resumed TLS 1.3 handshake sends the client a new ticket (TLS 1.2 resumptions never
  // do). On by default: OpenSSL clients treat a TLS 1.3 ticket as used up once resumed and need
  // the new one to resume again. Off saves the server about 7 % of a resumed handshake, for
  // clients that offer a ticket again (tern's, Go's): they resume with the ticket they have
  // until its lifetime (two hours) ends, then a full handshake brings a new one.
  bool reissue_tickets = true;
  // Hands record encryption to the kernel after the handshake where Linux offers kernel TLS
  // (setsockopt(TCP_ULP, "tls")), through OpenSSL's own kTLS support; where it does not, the
  // connection silently stays on user-space TLS. Each connection is counted under the path it
  // took (tls.kernel_tls or tls.user_space_tls). Off by default.
  bool kernel_tls = false;
};

// How a client context is set up.
struct ClientConfig {
  std::string ca_file;  // CA bundle (PEM file) the server must chain to; with ca_pem empty too,
  std::string ca_pem;   // the system's default bundle is used
  // Verification of the server's chain and of its name against the name given to connect. On
  // by default; turning it off accepts any server and should be kept to tests.
  bool verify_peer = true;
  std::vector<Certificate> certificate;  // zero or one: the client's own certificate (mTLS)
  std::vector<std::string> alpn;         // protocols offered, most preferred first
  TlsVersion min_version = TlsVersion::tls1_2;
  bool session_resumption = true;  // keeps the last session per server name and resumes it
  // Hands record encryption to the kernel after the handshake where Linux offers kernel TLS
  // (setsockopt(TCP_ULP, "tls")), through OpenSSL's own kTLS support; where it does not, the
  // connection silently stays on user-space TLS. Each connection is counted under the path it
  // took (tls.kernel_tls or tls.user_space_tls). Off by default.
  bool kernel_tls = false;
};

// OpenSSL settings shared by many TLS connections: certificates, trust, ALPN, versions and
// session resumption. A cheap handle: copies share one context. Built and reloaded from any
// thread; streams made from it keep what they started with across a reload().
class TlsContext {
 public:
  // An empty handle (is_valid() false); streams cannot be made from it.
  TlsContext() noexcept = default;

  // A server context; fails with TlsErrc::config and OpenSSL's reason when a certificate, key
  // or CA bundle does not load or a key does not match its certificate. Any thread.
  [[nodiscard]] static Result<TlsContext> server(ServerConfig config);
  // A client context. Any thread.
  [[nodiscard]] static Result<TlsContext> client(ClientConfig config);

  // Reads the certificates (and CA bundle) again from their files; connections that are open
  // keep theirs, later handshakes use the new ones. On failure nothing changes. Any thread.
  [[nodiscard]] Result<void> reload();
  // Replaces the certificates (server: the SNI list; client: its own certificate) as reload()
  // does. Any thread.
  [[nodiscard]] Result<void> reload(std::vector<Certificate> certificates);
  // reload() if a certificate, key or CA file changed (size, modification time or inode) since
  // the last load; true if it reloaded. For a periodic check (TlsServerOptions::watch_files).
  // Any thread.
  [[nodiscard]] Result<bool> reload_if_changed();

  // Whether this handle holds a context. Any thread.
  bool is_valid() const noexcept { return state_ != nullptr; }
  // Whether this context serves (true) or connects (false). Any thread.
  bool is_server() const noexcept;
  // How many times the certificates were (re)loaded: 1 after creation. Any thread.
  std::uint64_t generation() const noexcept;

  // The shared state; for tern::tls's own streams.
  const std::shared_ptr<detail::ContextState>& state() const noexcept { return state_; }

 private:
  explicit TlsContext(std::shared_ptr<detail::ContextState> state) noexcept
      : state_(std::move(state)) {}
  static Result<TlsContext> make(std::shared_ptr<detail::ContextState> state,
                                 const std::vector<std::string>& alpn);
  Result<void> reload_locked();
  std::shared_ptr<detail::ContextState> state_;
};

}  // namespace tern::tls
