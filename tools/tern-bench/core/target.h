#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tern/base/result.h"
#include "tern/net/address.h"

namespace tern::bench {

// Where a load run connects: a host (a name, a dotted IPv4 address, or an IPv6 address kept
// without its brackets) and a port. A value type; any thread.
struct Target {
  std::string host;
  std::uint16_t port = 0;

  // "tcp://host:port", with an IPv6 host in brackets.
  std::string to_string() const;
};

// Parses "tcp://host:port", "host:port" or "[v6]:port" (the last two also after tcp://). On
// failure returns std::errc::invalid_argument and, if `why` is given, says what is wrong.
// Any thread.
Result<Target> parse_target(std::string_view text, std::string* why = nullptr);

// Turns a target into a socket address: numeric hosts directly, names through getaddrinfo (the
// first address it returns). Blocks while resolving: call before the load starts. Any thread.
Result<net::Address> resolve_target(const Target& target, std::string* why = nullptr);

// resolve_target for subcommand `mode`: on failure prints "tern-bench MODE: why" on stderr.
Result<net::Address> resolve_target_or_say(const Target& target, const char* mode);

}  // namespace tern::bench
