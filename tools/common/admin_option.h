#pragma once

// The --admin option of tern's servers (tern-echo, tern-rpc-server): tern's admin endpoint
// (GET /metrics, /status) on HOST:PORT, announced at the end of the server's start line.

#include <cstdio>
#include <optional>
#include <string>

#include "tern/admin/admin_server.h"
#include "tern/net/address.h"

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
