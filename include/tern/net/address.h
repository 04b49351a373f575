#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tern/base/clock.h"
#include "tern/base/result.h"

namespace tern::net {

// A socket address: IPv4, IPv6 or a Unix socket path. A value type; usable from any thread.
class Address {
 public:
  // The unspecified address (family AF_UNSPEC).
  Address() noexcept = default;
  // Copies a sockaddr of `length` bytes.
  Address(const sockaddr* address, socklen_t length) noexcept;

  // Parses a numeric address: "1.2.3.4:80", "[::1]:80", "tcp://1.2.3.4:80",
  // "tcp://[::1]:80", "unix:/path/to/socket", "unix:@abstract-name", or ":80" / "*:80"
  // (all IPv4 interfaces). Host names are not resolved here (see resolve()). On failure
  // returns std::errc::invalid_argument whose message() says what is wrong ("'1.2.3.4': missing
  // port ..."), also put in *why when given.
  [[nodiscard]] static Result<Address> parse(std::string_view text, std::string* why = nullptr);
  // 127.0.0.1:port.
  static Address loopback(std::uint16_t port) noexcept;
  // An IPv4 address from a dotted quad and a port; invalid_argument for a bad quad.
  [[nodiscard]] static Result<Address> ipv4(std::string_view dotted, std::uint16_t port);

  int family() const noexcept { return storage_.ss_family; }
  bool is_ip() const noexcept { return family() == AF_INET || family() == AF_INET6; }
  bool is_unix() const noexcept { return family() == AF_UNIX; }
  // The port of an IP address (0 otherwise).
  std::uint16_t port() const noexcept;
  // A copy with another port (IP addresses only).
  Address with_port(std::uint16_t port) const noexcept;

  const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* data() noexcept { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t length() const noexcept { return length_; }
  // Sets the length after a system call filled data() (accept, getsockname).
  void set_length(socklen_t length) noexcept { length_ = length; }
  static constexpr socklen_t capacity() noexcept { return sizeof(sockaddr_storage); }

  // "1.2.3.4:80", "[::1]:80", "unix:/path", "unix:@name", or "unspecified".
  std::string to_string() const;

  friend bool operator==(const Address& a, const Address& b) noexcept;

 private:
  sockaddr_storage storage_ = {};
  socklen_t length_ = 0;
};

// Resolves "host:port" (or any form parse() takes) to addresses, with getaddrinfo run on the
// offload pool so the worker keeps running. Text that is not host:port fails as parse() does
// (invalid_argument, with parse's explanation as the message); a name the resolver cannot
// resolve fails with a code of resolve_category() whose message names it ("resolve
// no.such.host: Name or service not known"). `why`, if given, gets the same text as message().
// Worker fibers only.
[[nodiscard]] Result<std::vector<Address>> resolve(std::string_view host_port,
                                                   std::string* why = nullptr);

// The category of getaddrinfo's failures: value() is the EAI_* code, message() is
// gai_strerror's. Its codes are equivalent to no std::errc; compare with ResolveError. Any
// thread.
const std::error_category& resolve_category() noexcept;

// Conditions for comparing resolve() failures: `error == ResolveError::host_not_found`.
enum class ResolveError {
  host_not_found = EAI_NONAME,  // no such name (or no address of the asked family)
  try_again = EAI_AGAIN,        // a temporary failure of the name server
  failed = EAI_FAIL,            // a permanent failure of the name server
};

// Makes an error_condition of resolve_category() from a ResolveError. Any thread.
inline std::error_condition make_error_condition(ResolveError e) noexcept {
  return {static_cast<int>(e), resolve_category()};
}

}  // namespace tern::net

template <>
struct std::is_error_condition_enum<tern::net::ResolveError> : std::true_type {};
