#include "address_parse.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

#include "require.h"
#include "tern/net/address.h"

namespace tern::fuzz {

namespace {

void require(bool condition, const char* what) { fuzz::require(condition, "address parser", what); }

// The port written at the end of an IP address's text (after its last ':').
std::uint16_t written_port(std::string_view text) {
  const std::string_view digits = text.substr(text.rfind(':') + 1);
  unsigned value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  require(error == std::errc() && end == digits.data() + digits.size() && value <= 65535,
          "an accepted address's port is not a decimal number up to 65535");
  return static_cast<std::uint16_t>(value);
}

// Checks an accepted address against the text it came from.
void check_shape(const net::Address& address, std::string_view text) {
  switch (address.family()) {
    case AF_INET: {
      require(address.length() == sizeof(sockaddr_in), "an IPv4 address of the wrong length");
      require(address.port() == written_port(text), "an IPv4 address with another port");
      std::string_view host = text.substr(0, text.rfind(':'));
      if (host.starts_with("tcp://")) host.remove_prefix(6);
      if (!host.empty() && host != "*") {
        tern::Result<net::Address> dotted = net::Address::ipv4(host, address.port());
        require(dotted && *dotted == address, "parse and ipv4() disagree on a dotted quad");
      }
      return;
    }
    case AF_INET6:
      require(address.length() == sizeof(sockaddr_in6), "an IPv6 address of the wrong length");
      require(address.port() == written_port(text), "an IPv6 address with another port");
      require(text.starts_with('[') || text.starts_with("tcp://["),
              "an IPv6 address accepted without brackets");
      return;
    case AF_UNIX: {
      require(text.starts_with("unix:"), "a Unix socket address without unix:");
      const std::string_view path = text.substr(5);
      const bool abstract = path.starts_with('@');
      require(
          address.length() == offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 0 : 1),
          "a Unix socket address of the wrong length");
      require(address.port() == 0, "a Unix socket address with a port");
      // The kernel reads a path up to its first NUL: a path holding one names another socket.
      require(abstract || path.find('\0') == std::string_view::npos,
              "a Unix socket path with a NUL byte accepted");
      return;
    }
    default:
      require(false, "an accepted address of no known family");
  }
}

}  // namespace

AddressSummary parse_address_text(std::string_view text) {
  std::string why;
  const tern::Result<net::Address> parsed = net::Address::parse(text, &why);
  const tern::Result<net::Address> quiet = net::Address::parse(text);
  require(parsed.has_value() == quiet.has_value(), "the answer depends on asking why");
  if (!parsed) {
    require(parsed.error() == std::errc::invalid_argument &&
                quiet.error() == std::errc::invalid_argument,
            "a rejection that is not invalid_argument");
    const std::string quoted = "'" + std::string(text) + "': ";
    require(why.size() > quoted.size() && why.starts_with(quoted),
            "a rejection that does not quote the input and say why");
    return {};
  }
  const net::Address& address = *parsed;
  require(*quiet == address, "two parses of the same text differ");
  check_shape(address, text);

  const std::string shown = address.to_string();
  const tern::Result<net::Address> again = net::Address::parse(shown);
  require(again.has_value(), "an address's text does not parse");
  require(*again == address, "an address's text parses to another address");
  require(again->to_string() == shown, "an address's text changes when parsed again");
  require(net::Address(address.data(), address.length()) == address,
          "a copy through sockaddr differs");
  if (address.is_ip()) {
    const std::uint16_t other = static_cast<std::uint16_t>(address.port() ^ 0x5a5a);
    const net::Address moved = address.with_port(other);
    require(moved.port() == other && moved.family() == address.family() &&
                moved.with_port(address.port()) == address,
            "with_port changes more than the port");
  }
  return {.parsed = true, .family = address.family()};
}

}  // namespace tern::fuzz
