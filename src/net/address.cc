#include "tern/net/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>

#include "tern/base/detail/sys_calls.h"
#include "tern/io/offload.h"

namespace tern::net {

namespace {

// Concatenates text pieces with append (GCC 12 at -O3 reports a false -Wrestrict on
// chains of operator+ on strings).
template <typename... Pieces>
std::string cat(const Pieces&... pieces) {
  std::string text;
  (text.append(pieces), ...);
  return text;
}

// Fails a parse of `input` with invalid_argument, explaining why in *why as "'input': problem".
template <typename... Problem>
Result<Address> reject(std::string* why, std::string_view input, const Problem&... problem) {
  *why = cat("'", input, "': ", problem...);
  return fail(std::errc::invalid_argument);
}

// Address::parse's failure as the caller sees it: invalid_argument whose message is the
// explanation (also in *why, when given).
std::error_code not_an_address(std::string explanation, std::string* why) {
  std::error_code code =
      with_explanation(std::make_error_code(std::errc::invalid_argument), explanation);
  if (why != nullptr) *why = std::move(explanation);
  return code;
}

// getaddrinfo's failures (EAI_*), with gai_strerror's text.
class ResolveCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern.resolve"; }
  std::string message(int value) const override { return ::gai_strerror(value); }
};

// Parses a decimal port 0..65535.
bool parse_port(std::string_view text, std::uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  unsigned value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value > 65535) return false;
  *port = static_cast<std::uint16_t>(value);
  return true;
}

// Splits "host:port" or "[v6]:port" into its parts.
bool split_host_port(std::string_view text, std::string_view* host, std::string_view* port,
                     bool* bracketed) {
  *bracketed = false;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    *host = text.substr(1, close - 1);
    *port = text.substr(close + 2);
    *bracketed = true;
    return true;
  }
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  *host = text.substr(0, colon);
  *port = text.substr(colon + 1);
  return host->find(':') == std::string_view::npos;  // bare IPv6 needs brackets
}

Result<Address> parse_numeric(std::string_view text, std::string* why);

}  // namespace

Address::Address(const sockaddr* address, socklen_t length) noexcept {
  if (length > sizeof storage_) length = sizeof storage_;
  std::memcpy(&storage_, address, length);
  length_ = length;
}

Result<Address> Address::parse(std::string_view text, std::string* why) {
  std::string explanation;
  Result<Address> address = parse_numeric(text, &explanation);
  if (!address) return fail(not_an_address(std::move(explanation), why));
  return address;
}

namespace {

// Address::parse without the error's message: *why gets the explanation. Also the first step of
// resolve(), where a host name is no failure.
Result<Address> parse_numeric(std::string_view text, std::string* why) {
  const std::string original(text);
  if (text.starts_with("unix:")) {
    std::string_view path = text.substr(5);
    if (path.empty()) return reject(why, original, "empty Unix socket path");
    sockaddr_un un = {};
    un.sun_family = AF_UNIX;
    const bool abstract = path.front() == '@';
    if (abstract && path.size() == 1) return reject(why, original, "empty abstract socket name");
    // The kernel ends a path at its first NUL: one inside would name another socket.
    if (!abstract && path.find('\0') != std::string_view::npos)
      return reject(why, original, "NUL byte in a Unix socket path");
    // A path needs its terminating NUL; an abstract name's '@' stands for its leading NUL.
    if (path.size() > sizeof un.sun_path - (abstract ? 0 : 1))
      return reject(why, original, "Unix socket path longer than ",
                    std::to_string(sizeof un.sun_path - 1), " bytes");
    std::memcpy(un.sun_path, path.data(), path.size());
    if (abstract) un.sun_path[0] = '\0';
    return Address(
        reinterpret_cast<sockaddr*>(&un),
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 0 : 1)));
  }
  if (text.starts_with("tcp://")) text.remove_prefix(6);
  if (text.find("://") != std::string_view::npos)
    return reject(why, original, "unknown scheme (use tcp:// or unix:)");
  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;
  if (!split_host_port(text, &host, &port_text, &bracketed)) {
    if (!text.starts_with('[') && text.find(':') != text.rfind(':'))
      return reject(why, original, "an IPv6 address needs brackets, as in [::1]:80");
    const bool no_port = text.starts_with('[') ? text.ends_with(']') : !text.empty();
    if (no_port) return reject(why, original, "missing port (expected host:port or [ipv6]:port)");
    return reject(why, original, "expected host:port, [ipv6]:port or unix:/path");
  }
  std::uint16_t port = 0;
  if (!parse_port(port_text, &port))
    return reject(why, original, "port '", port_text, "' is not a number from 0 to 65535");
  const std::string host_string(host);
  if (bracketed) {
    sockaddr_in6 in6 = {};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    if (::inet_pton(AF_INET6, host_string.c_str(), &in6.sin6_addr) != 1)
      return reject(why, original, "'", host_string, "' is not an IPv6 address");
    return Address(reinterpret_cast<sockaddr*>(&in6), sizeof in6);
  }
  sockaddr_in in = {};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  if (host.empty() || host == "*") {
    in.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (::inet_pton(AF_INET, host_string.c_str(), &in.sin_addr) != 1) {
    return reject(why, original, "'", host_string,
                  "' is not an IPv4 address (host names need tern::net::resolve)");
  }
  return Address(reinterpret_cast<sockaddr*>(&in), sizeof in);
}

}  // namespace

Address Address::loopback(std::uint16_t port) noexcept {
  sockaddr_in in = {};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return Address(reinterpret_cast<sockaddr*>(&in), sizeof in);
}

Result<Address> Address::ipv4(std::string_view dotted, std::uint16_t port) {
  sockaddr_in in = {};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  if (::inet_pton(AF_INET, std::string(dotted).c_str(), &in.sin_addr) != 1)
    return fail(std::errc::invalid_argument);
  return Address(reinterpret_cast<sockaddr*>(&in), sizeof in);
}

std::uint16_t Address::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

Address Address::with_port(std::uint16_t port) const noexcept {
  Address copy = *this;
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&copy.storage_)->sin_port = htons(port);
  if (family() == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&copy.storage_)->sin6_port = htons(port);
  return copy;
}

std::string Address::to_string() const {
  // Built with append: GCC 12 at -O3 reports a false -Wrestrict on operator+ chains here.
  char host[INET6_ADDRSTRLEN] = {};
  std::string text;
  switch (family()) {
    case AF_INET: {
      // By hand rather than inet_ntop, whose sprintf takes kilobytes of stack: formatting a new
      // connection's peer on a fresh fiber stack touched a page for it (a fault and 4 KiB of
      // memory per connection).
      const auto append_decimal = [&text](unsigned value) {
        char digits[8];
        const std::to_chars_result end = std::to_chars(digits, digits + sizeof digits, value);
        text.append(digits, end.ptr);
      };
      const auto* octets = reinterpret_cast<const unsigned char*>(
          &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr);
      text.reserve(sizeof "255.255.255.255:65535");
      for (int i = 0; i < 4; ++i) {
        if (i > 0) text.push_back('.');
        append_decimal(octets[i]);
      }
      text.push_back(':');
      append_decimal(port());
      return text;
    }
    case AF_INET6:
      ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, host,
                  sizeof host);
      text.append("[").append(host).append("]:").append(std::to_string(port()));
      return text;
    case AF_UNIX: {
      const auto* un = reinterpret_cast<const sockaddr_un*>(&storage_);
      const std::size_t path_length =
          length_ > offsetof(sockaddr_un, sun_path) ? length_ - offsetof(sockaddr_un, sun_path) : 0;
      if (path_length > 0 && un->sun_path[0] == '\0') {
        text.append("unix:@").append(un->sun_path + 1, path_length - 1);
      } else {
        text.append("unix:").append(un->sun_path, strnlen(un->sun_path, path_length));
      }
      return text;
    }
    default:
      return "unspecified";
  }
}

bool operator==(const Address& a, const Address& b) noexcept {
  return a.length_ == b.length_ && std::memcmp(&a.storage_, &b.storage_, a.length_) == 0;
}

Result<std::vector<Address>> resolve(std::string_view host_port, std::string* why) {
  std::string parse_why;
  Result<Address> numeric = parse_numeric(host_port, &parse_why);
  if (numeric) return std::vector<Address>{*numeric};
  // Only host:port with a valid port and a host that is not an IP address goes to the
  // resolver; any other text is not an address, for the reason parse() gave.
  std::string_view text = host_port;
  if (text.starts_with("tcp://")) text.remove_prefix(6);
  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;
  std::uint16_t port = 0;
  if (text.starts_with("unix:") || text.find("://") != std::string_view::npos ||
      !split_host_port(text, &host, &port_text, &bracketed) || bracketed || host.empty() ||
      !parse_port(port_text, &port)) {
    return fail(not_an_address(std::move(parse_why), why));
  }
  const std::string host_string(host);
  const std::string port_string(port_text);
  struct Lookup {
    int rc = 0;
    int error = 0;  // errno, for EAI_SYSTEM
    std::vector<Address> found;
  };
  Lookup lookup = io::offload([&] {
    Lookup out;
    addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    out.rc = tern::detail::sys.getaddrinfo(host_string.c_str(), port_string.c_str(), &hints, &list);
    out.error = errno;
    for (addrinfo* ai = list; out.rc == 0 && ai != nullptr; ai = ai->ai_next)
      out.found.emplace_back(ai->ai_addr, ai->ai_addrlen);
    if (list != nullptr) ::freeaddrinfo(list);
    return out;
  });
  if (lookup.rc == 0 && !lookup.found.empty()) return lookup.found;
  const std::error_code cause =
      lookup.rc == EAI_SYSTEM
          ? std::error_code(lookup.error, std::system_category())
          : std::error_code(lookup.rc != 0 ? lookup.rc : EAI_NONAME, resolve_category());
  const std::error_code error = with_context(cause, cat("resolve ", host_string));
  if (why != nullptr) *why = error.message();
  return fail(error);
}

const std::error_category& resolve_category() noexcept {
  static const ResolveCategory category;
  return category;
}

}  // namespace tern::net
