#include "core/target.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cctype>
#include <charconv>
#include <cstdio>

#include "fmt/format.h"

namespace tern::bench {

namespace {

Result<Target> reject(std::string* why, std::string message) {
  if (why != nullptr) *why = std::move(message);
  return fail(std::errc::invalid_argument);
}

bool valid_host_name(std::string_view host) {
  for (char c : host) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '-' && c != '_')
      return false;
  }
  return true;
}

bool looks_like_ipv4(std::string_view host) {
  for (char c : host) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0 && c != '.') return false;
  }
  return true;
}

}  // namespace

std::string Target::to_string() const {
  if (host.find(':') != std::string::npos) return fmt::format("tcp://[{}]:{}", host, port);
  return fmt::format("tcp://{}:{}", host, port);
}

Result<Target> parse_target(std::string_view text, std::string* why) {
  const std::string_view original = text;
  if (text.empty()) return reject(why, "empty target: expected tcp://host:port");
  if (const std::size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    if (text.substr(0, scheme) != "tcp")
      return reject(why, fmt::format("'{}': unsupported scheme '{}://' (only tcp:// is supported)",
                                     original, text.substr(0, scheme)));
    text.remove_prefix(scheme + 3);
  }
  Target target;
  std::string_view port_text;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos)
      return reject(why, fmt::format("'{}': '[' without a closing ']'", original));
    const std::string_view host = text.substr(1, close - 1);
    if (host.empty()) return reject(why, fmt::format("'{}': empty IPv6 address in []", original));
    in6_addr ignored;
    if (::inet_pton(AF_INET6, std::string(host).c_str(), &ignored) != 1)
      return reject(why, fmt::format("'{}': '{}' is not an IPv6 address", original, host));
    if (close + 1 >= text.size() || text[close + 1] != ':')
      return reject(why, fmt::format("'{}': expected ':port' after ']'", original));
    target.host = std::string(host);
    port_text = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos)
      return reject(why, fmt::format("'{}': missing ':port' (expected tcp://host:port)", original));
    const std::string_view host = text.substr(0, colon);
    if (host.empty()) return reject(why, fmt::format("'{}': missing host before ':'", original));
    if (host.find(':') != std::string_view::npos)
      return reject(
          why, fmt::format("'{}': an IPv6 address needs brackets, as in [::1]:7000", original));
    if (!valid_host_name(host))
      return reject(why, fmt::format("'{}': '{}' is not a valid host name", original, host));
    if (looks_like_ipv4(host)) {
      in_addr ignored;
      if (::inet_pton(AF_INET, std::string(host).c_str(), &ignored) != 1)
        return reject(why, fmt::format("'{}': '{}' is not an IPv4 address", original, host));
    }
    target.host = std::string(host);
    port_text = text.substr(colon + 1);
  }
  unsigned port = 0;
  const auto [end, error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc{} || end != port_text.data() + port_text.size() ||
      port == 0 || port > 65535)
    return reject(
        why, fmt::format("'{}': port '{}' is not a number from 1 to 65535", original, port_text));
  target.port = static_cast<std::uint16_t>(port);
  return target;
}

Result<net::Address> resolve_target(const Target& target, std::string* why) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(target.port);
  const int status = ::getaddrinfo(target.host.c_str(), port.c_str(), &hints, &found);
  if (status != 0 || found == nullptr) {
    if (why != nullptr)
      *why = fmt::format("cannot resolve '{}': {}", target.host, ::gai_strerror(status));
    return fail(std::errc::host_unreachable);
  }
  net::Address address(found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  return address;
}

Result<net::Address> resolve_target_or_say(const Target& target, const char* mode) {
  std::string why;
  Result<net::Address> address = resolve_target(target, &why);
  if (!address) std::fprintf(stderr, "tern-bench %s: %s\n", mode, why.c_str());
  return address;
}

}  // namespace tern::bench
