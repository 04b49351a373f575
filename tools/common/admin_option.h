#pragma once

// The --admin option of tern's servers (tern-echo, tern-rpc-server): tern's admin endpoint
// (GET /metrics, /status) on HOST:PORT, announced at the end of the server's start line; and
// the options that protect it (--admin-tls-cert/--admin-tls-key/--admin-tls-ca for HTTPS and
// mutual TLS, --admin-token-file for a bearer token).

#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "tern/admin/admin_server.h"
#include "tern/admin/admin_tls.h"
#include "tern/net/address.h"
#include "tern/tls/tls_context.h"

namespace tern::tools {

// The help text of --admin.
inline constexpr const char* kAdminOptionHelp =
    "serve tern's admin endpoint (GET /metrics, /status) on HOST:PORT (port 0: the kernel "
    "picks; printed at the end of the first line as 'admin HOST:PORT')";

// Parses --admin's text into `address` (empty text: none). Returns why the text is wrong
// ("--admin TEXT: why"), or an empty string. Main thread, before the runtime starts.
inline std::string check_admin_option(const std::string& text,
                                      std::optional<net::Address>& address) {
  if (text.empty()) return {};
  std::string why;
  Result<net::Address> parsed = net::Address::parse(text, &why);
  if (!parsed) return "--admin " + text + ": " + (why.empty() ? parsed.error().message() : why);
  address = *parsed;
  return {};
}

// Like check_admin_option, but prints why the text is wrong, naming `tool`, and returns false.
// Main thread, before the runtime starts.
inline bool parse_admin_option(const char* tool, const std::string& text,
                               std::optional<net::Address>& address) {
  const std::string why = check_admin_option(text, address);
  if (why.empty()) return true;
  std::fprintf(stderr, "%s: %s\n", tool, why.c_str());
  return false;
}

// The options that protect the admin endpoint, as given.
struct AdminAccessFlags {
  std::string tls_cert;    // PEM certificate chain: serve the endpoint over HTTPS (with tls_key)
  std::string tls_key;     // its private key
  std::string tls_ca;      // CA bundle: require client certificates that chain to it
  std::string token_file;  // a file holding the bearer token every request must carry
};

// Adds --admin-tls-cert, --admin-tls-key, --admin-tls-ca and --admin-token-file to `app` (a
// CLI::App). Main thread.
template <typename App>
void add_admin_access_options(App& app, AdminAccessFlags& flags) {
  app.add_option("--admin-tls-cert", flags.tls_cert,
                 "serve the admin endpoint over HTTPS with this PEM certificate chain (with "
                 "--admin-tls-key)");
  app.add_option("--admin-tls-key", flags.tls_key, "the PEM private key of --admin-tls-cert");
  app.add_option("--admin-tls-ca", flags.tls_ca,
                 "admit only admin clients whose certificate chains to this PEM CA bundle "
                 "(mutual TLS; needs --admin-tls-cert)");
  app.add_option("--admin-token-file", flags.token_file,
                 "answer only admin requests with 'Authorization: Bearer TOKEN', TOKEN being "
                 "this file's content (others get 401)");
}

// Checks the flags (they need --admin: `admin_given`) and fills `options`: a TLS transport when
// a certificate is given (its files are loaded here), the token file (read when the endpoint
// starts). Returns why a flag is wrong ("--admin-tls-key: why"), or an empty string. Main
// thread, before the runtime starts.
inline std::string check_admin_access(const AdminAccessFlags& flags, bool admin_given,
                                      admin::AdminOptions& options) {
  const bool any = !flags.tls_cert.empty() || !flags.tls_key.empty() || !flags.tls_ca.empty() ||
                   !flags.token_file.empty();
  if (any && !admin_given)
    return "--admin-tls-*/--admin-token-file: they protect --admin, not given";
  if (flags.tls_cert.empty() != flags.tls_key.empty())
    return "--admin-tls-cert and --admin-tls-key go together";
  if (!flags.tls_ca.empty() && flags.tls_cert.empty())
    return "--admin-tls-ca: client certificates are asked for over TLS only (--admin-tls-cert)";
  options.token_file = flags.token_file;
  if (flags.tls_cert.empty()) return {};
  Result<tls::TlsContext> context = tls::TlsContext::server(
      {.certificates = {tls::Certificate::files(flags.tls_cert, flags.tls_key)},
       .ca_file = flags.tls_ca,
       .client_auth = flags.tls_ca.empty() ? tls::ClientAuth::none : tls::ClientAuth::require});
  if (!context) return "--admin-tls-cert: " + context.error().message();
  options.transport = admin::tls_transport(std::move(*context));
  return {};
}

// Starts `admin` on `address` when there is one. Returns the start line's suffix (", admin
// HOST:PORT", or empty without --admin), or nullopt after printing why it could not start.
// Worker fiber.
inline std::optional<std::string> start_admin(const char* tool, admin::AdminServer& admin,
                                              const std::optional<net::Address>& address) {
  if (!address) return std::string();
  Result<net::Address> bound = admin.start(*address);
  if (!bound) {
    std::fprintf(stderr, "%s: cannot serve the admin endpoint: %s\n", tool,
                 bound.error().message().c_str());  // the message names the address
    return std::nullopt;
  }
  return ", admin " + bound->to_string();
}

}  // namespace tern::tools
