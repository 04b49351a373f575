#pragma once

// The --admin option of tern's servers (tern-echo, tern-rpc-server): tern's admin endpoint
// (GET /metrics, /status) on HOST:PORT, announced at the end of the server's start line.

#include <cstdio>
#include <optional>
#include <string>

#include "tern/net/address.h"
#include "tern/admin/admin_server.h"

namespace tern::tools {

// The help text of --admin.
inline constexpr const char* kAdminOptionHelp =
    "serve tern's admin endpoint (GET /metrics, /status) on HOST:PORT (port 0: the kernel "
    "picks; printed at the end of the first line as 'admin HOST:PORT')";

// Parses --admin's text into `address` (empty text: none). Prints why it is wrong, naming
// `tool`, and returns false on bad text. Main thread, before the runtime starts.
inline bool parse_admin_option(const char* tool, const std::string& text,
                               std::optional<net::Address>& address) {
  if (text.empty()) return true;
  std::string why;
  Result<net::Address> parsed = net::Address::parse(text, &why);
  if (!parsed) {
    std::fprintf(stderr, "%s: --admin %s: %s\n", tool, text.c_str(),
                 why.empty() ? parsed.error().message().c_str() : why.c_str());
    return false;
  }
  address = *parsed;
  return true;
}

// Starts `admin` on `address` when there is one. Returns the start line's suffix (", admin
// HOST:PORT", or empty without --admin), or nullopt after printing why it could not start.
// Worker fiber.
inline std::optional<std::string> start_admin(const char* tool, admin::AdminServer& admin,
                                              const std::optional<net::Address>& address) {
  if (!address) return std::string();
  Result<net::Address> bound = admin.start(*address);
  if (!bound) {
    std::fprintf(stderr, "%s: cannot serve the admin endpoint on %s: %s\n", tool,
                 address->to_string().c_str(), bound.error().message().c_str());
    return std::nullopt;
  }
  return ", admin " + bound->to_string();
}

}  // namespace tern::tools
