// tern::net::Address: every documented textual form, to_string round trips, ports, equality,
// malformed inputs with their explanations, and resolve() (getaddrinfo on the offload pool).
#include "tern/net/address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstddef>
#include <string>
#include <vector>

#include "net_test_util.h"

namespace {

using tern::net::Address;
using tern_test::run_on;

Address parsed(std::string_view text) {
  std::string why;
  tern::Result<Address> address = Address::parse(text, &why);
  EXPECT_TRUE(address) << text << ": " << why;
  return address.value_or(Address());
}

const sockaddr_un& as_unix(const Address& address) {
  return *reinterpret_cast<const sockaddr_un*>(address.data());
}

TEST(AddressParse, Ipv4HostAndPort) {
  const Address a = parsed("1.2.3.4:80");
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_TRUE(a.is_ip());
  EXPECT_FALSE(a.is_unix());
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.length(), sizeof(sockaddr_in));
  const auto* in = reinterpret_cast<const sockaddr_in*>(a.data());
  EXPECT_EQ(in->sin_addr.s_addr, htonl(0x01020304));
  EXPECT_EQ(a.to_string(), "1.2.3.4:80");
  EXPECT_EQ(parsed("255.255.255.255:65535").port(), 65535);
  EXPECT_EQ(parsed("0.0.0.0:0").port(), 0);
  EXPECT_EQ(parsed("255.255.255.255:65535").to_string(), "255.255.255.255:65535");
  EXPECT_EQ(parsed("0.0.0.0:0").to_string(), "0.0.0.0:0");
  EXPECT_EQ(parsed("10.0.100.9:443").to_string(), "10.0.100.9:443");
}

TEST(AddressParse, BracketedIpv6) {
  const Address a = parsed("[::1]:8080");
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_TRUE(a.is_ip());
  EXPECT_EQ(a.port(), 8080);
  EXPECT_EQ(a.length(), sizeof(sockaddr_in6));
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.data());
  EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr));
  EXPECT_EQ(a.to_string(), "[::1]:8080");
  EXPECT_EQ(parsed("[2001:db8::42]:443").to_string(), "[2001:db8::42]:443");
  EXPECT_EQ(parsed("[::]:1").to_string(), "[::]:1");
  EXPECT_EQ(parsed("[::ffff:1.2.3.4]:9").to_string(), "[::ffff:1.2.3.4]:9");
}

TEST(AddressParse, TcpSchemeIsTheSameAddress) {
  EXPECT_EQ(parsed("tcp://1.2.3.4:80"), parsed("1.2.3.4:80"));
  EXPECT_EQ(parsed("tcp://[::1]:80"), parsed("[::1]:80"));
  EXPECT_EQ(parsed("tcp://:80"), parsed("0.0.0.0:80"));
  EXPECT_EQ(parsed("tcp://1.2.3.4:80").to_string(), "1.2.3.4:80");
}

TEST(AddressParse, UnixPath) {
  const Address a = parsed("unix:/tmp/tern/some.sock");
  EXPECT_EQ(a.family(), AF_UNIX);
  EXPECT_TRUE(a.is_unix());
  EXPECT_FALSE(a.is_ip());
  EXPECT_EQ(a.port(), 0);
  EXPECT_STREQ(as_unix(a).sun_path, "/tmp/tern/some.sock");
  // The length counts the terminating NUL, as getsockname reports it for a bound path.
  EXPECT_EQ(a.length(), offsetof(sockaddr_un, sun_path) + sizeof("/tmp/tern/some.sock"));
  EXPECT_EQ(a.to_string(), "unix:/tmp/tern/some.sock");
  EXPECT_EQ(parsed("unix:relative.sock").to_string(), "unix:relative.sock");
}

TEST(AddressParse, UnixAbstractName) {
  const Address a = parsed("unix:@tern-abstract");
  EXPECT_TRUE(a.is_unix());
  const sockaddr_un& un = as_unix(a);
  EXPECT_EQ(un.sun_path[0], '\0');
  EXPECT_EQ(std::string(un.sun_path + 1, 13), "tern-abstract");
  // No terminating NUL: the name is exactly the bytes after the leading NUL.
  EXPECT_EQ(a.length(), offsetof(sockaddr_un, sun_path) + 1 + 13);
  EXPECT_EQ(a.to_string(), "unix:@tern-abstract");
  EXPECT_NE(a, parsed("unix:tern-abstract"));
}

TEST(AddressParse, PortAloneMeansEveryIpv4Interface) {
  const Address any = parsed(":80");
  EXPECT_EQ(any.family(), AF_INET);
  EXPECT_EQ(any.port(), 80);
  EXPECT_EQ(any.to_string(), "0.0.0.0:80");
  EXPECT_EQ(parsed("*:80"), any);
  EXPECT_EQ(parsed("0.0.0.0:80"), any);
}

TEST(AddressParse, WhyIsOptional) {
  tern::Result<Address> bad = Address::parse("nonsense");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), std::errc::invalid_argument);
  std::string why = "untouched";
  ASSERT_TRUE(Address::parse("1.2.3.4:5", &why));
}

TEST(AddressToString, RoundTripsEveryForm) {
  const std::vector<std::string> canonical = {
      "1.2.3.4:80", "127.0.0.1:0", "0.0.0.0:65535", "[::1]:80",         "[fe80::1:2]:7",
      "[::]:0",     "unix:/a/b/c", "unix:@name",    "unix:@with space", "unix:x",
  };
  for (const std::string& text : canonical) {
    const Address a = parsed(text);
    EXPECT_EQ(a.to_string(), text);
    const Address again = parsed(a.to_string());
    EXPECT_EQ(again, a) << text;
    EXPECT_EQ(again.length(), a.length()) << text;
  }
  // Non-canonical spellings print canonically.
  EXPECT_EQ(parsed("[0:0::1]:80").to_string(), "[::1]:80");
  EXPECT_EQ(parsed("*:9").to_string(), "0.0.0.0:9");
  EXPECT_EQ(parsed("1.2.3.4:080").to_string(), "1.2.3.4:80");
}

TEST(AddressToString, UnspecifiedAndUnnamed) {
  const Address none;
  EXPECT_EQ(none.family(), AF_UNSPEC);
  EXPECT_FALSE(none.is_ip());
  EXPECT_FALSE(none.is_unix());
  EXPECT_EQ(none.port(), 0);
  EXPECT_EQ(none.to_string(), "unspecified");
  // An unbound Unix socket's address (getpeername of a client that never bound) is the family
  // alone.
  sockaddr_un un = {};
  un.sun_family = AF_UNIX;
  const Address unnamed(reinterpret_cast<const sockaddr*>(&un), sizeof(sa_family_t));
  EXPECT_TRUE(unnamed.is_unix());
  EXPECT_EQ(unnamed.to_string(), "unix:");
}

TEST(AddressPort, WithPortChangesOnlyThePort) {
  const Address v4 = parsed("10.1.2.3:80");
  const Address moved = v4.with_port(8443);
  EXPECT_EQ(moved.port(), 8443);
  EXPECT_EQ(moved.to_string(), "10.1.2.3:8443");
  EXPECT_EQ(v4.port(), 80);  // the original is untouched
  EXPECT_EQ(moved.with_port(80), v4);

  const Address v6 = parsed("[::1]:1");
  EXPECT_EQ(v6.with_port(65535).to_string(), "[::1]:65535");
  EXPECT_EQ(v6.with_port(65535).port(), 65535);

  const Address un = parsed("unix:/x");
  EXPECT_EQ(un.with_port(5), un);  // not an IP address: nothing to change
  EXPECT_EQ(un.with_port(5).port(), 0);
}

TEST(AddressEquality, ComparesFamilyHostAndPort) {
  EXPECT_EQ(parsed("1.2.3.4:80"), parsed("1.2.3.4:80"));
  EXPECT_NE(parsed("1.2.3.4:80"), parsed("1.2.3.4:81"));
  EXPECT_NE(parsed("1.2.3.4:80"), parsed("1.2.3.5:80"));
  EXPECT_NE(parsed("[::ffff:1.2.3.4]:80"), parsed("1.2.3.4:80"));
  EXPECT_NE(parsed("[::1]:80"), parsed("[::2]:80"));
  EXPECT_NE(parsed("unix:/a"), parsed("unix:/b"));
  EXPECT_NE(parsed("unix:/a"), parsed("unix:/ab"));
  EXPECT_NE(parsed("unix:@a"), parsed("unix:@ab"));
  EXPECT_EQ(Address(), Address());
  EXPECT_NE(Address(), parsed("0.0.0.0:0"));

  sockaddr_in in = {};
  in.sin_family = AF_INET;
  in.sin_port = htons(80);
  in.sin_addr.s_addr = htonl(0x01020304);
  EXPECT_EQ(Address(reinterpret_cast<const sockaddr*>(&in), sizeof in), parsed("1.2.3.4:80"));
}

TEST(AddressFactories, LoopbackAndIpv4) {
  EXPECT_EQ(Address::loopback(4242), parsed("127.0.0.1:4242"));
  EXPECT_EQ(Address::loopback(0).to_string(), "127.0.0.1:0");
  tern::Result<Address> a = Address::ipv4("10.0.0.1", 5);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, parsed("10.0.0.1:5"));
  for (const char* bad : {"10.0.0", "10.0.0.256", "", "::1", "localhost"}) {
    tern::Result<Address> b = Address::ipv4(bad, 5);
    ASSERT_FALSE(b) << bad;
    EXPECT_EQ(b.error(), std::errc::invalid_argument) << bad;
  }
}

struct Malformed {
  std::string text;
  std::string problem;  // a phrase the explanation must contain
};

TEST(AddressParse, MalformedInputsSayWhatIsWrong) {
  const std::string too_long(sizeof(sockaddr_un{}.sun_path), 'p');  // one byte too many
  const std::vector<Malformed> cases = {
      {"1.2.3.4", "expected host:port"},        // missing port
      {"", "expected host:port"},               // nothing at all
      {"[::1]", "expected host:port"},          // bracketed, missing port
      {"[::1]80", "expected host:port"},        // no colon after the bracket
      {"[::1:80", "expected host:port"},        // unclosed bracket
      {"1.2.3.4:", "port '' is not a number"},  // empty port
      {"1.2.3.4:70000", "port '70000' is not a number from 0 to 65535"},
      {"1.2.3.4:65536", "port '65536'"},
      {"1.2.3.4:123456", "port '123456'"},
      {"1.2.3.4:-1", "port '-1'"},
      {"1.2.3.4:+80", "port '+80'"},
      {"1.2.3.4:http", "port 'http'"},
      {"1.2.3.4:80 ", "port '80 '"},
      {"[::1]:70000", "port '70000'"},
      {"1.2.3.256:80", "'1.2.3.256' is not an IPv4 address"},  // bad IPv4
      {"1.2.3:80", "'1.2.3' is not an IPv4 address"},
      {"1.2.3.4.5:80", "'1.2.3.4.5' is not an IPv4 address"},
      {"localhost:80", "host names need tern::net::resolve"},
      {"[1.2.3.4]:80", "'1.2.3.4' is not an IPv6 address"},
      {"[::g]:80", "'::g' is not an IPv6 address"},
      {"::1:80", "IPv6 address needs brackets"},  // bare IPv6
      {"fe80::1:443", "IPv6 address needs brackets"},
      {"http://1.2.3.4:80", "unknown scheme"},
      {"udp://1.2.3.4:80", "unknown scheme"},
      {"unix:", "empty Unix socket path"},
      {"unix:@", "empty abstract socket name"},
      {"unix:/" + too_long, "Unix socket path longer than 107 bytes"},
      {"unix:@" + too_long, "Unix socket path longer than 107 bytes"},
      // The kernel would stop at the NUL and name another socket.
      {std::string("unix:/run/tern\0.sock", 20), "NUL byte in a Unix socket path"},
      {std::string("unix:\0name", 10), "NUL byte in a Unix socket path"},
  };
  for (const Malformed& c : cases) {
    std::string why;
    tern::Result<Address> address = Address::parse(c.text, &why);
    ASSERT_FALSE(address) << "'" << c.text << "' parsed as " << address->to_string();
    EXPECT_EQ(address.error(), std::errc::invalid_argument) << c.text;
    EXPECT_NE(why.find(c.problem), std::string::npos)
        << "'" << c.text << "': explanation \"" << why << "\" should say \"" << c.problem << "\"";
    EXPECT_NE(why.find("'" + c.text + "'"), std::string::npos)
        << "the explanation \"" << why << "\" should quote the input";
  }
}

TEST(AddressParse, LongestAbstractNameFits) {
  // An abstract name has no terminating NUL: all of sun_path after the leading NUL is usable.
  const std::string longest(sizeof(sockaddr_un{}.sun_path) - 1, 'n');
  const Address a = parsed("unix:@" + longest);
  EXPECT_EQ(a.to_string(), "unix:@" + longest);
  EXPECT_EQ(a.length(), sizeof(sockaddr_un));
}

TEST(AddressParse, LongestUnixPathFits) {
  const std::string longest(sizeof(sockaddr_un{}.sun_path) - 1, 'p');  // room for the NUL
  const Address a = parsed("unix:/" + longest.substr(1));
  EXPECT_EQ(a.to_string(), "unix:/" + longest.substr(1));
  EXPECT_EQ(a.length(), sizeof(sockaddr_un));
}

TEST(AddressResolve, LocalhostIsLoopback) {
  run_on(1, [] {
    std::string why;
    tern::Result<std::vector<Address>> found = tern::net::resolve("localhost:80", &why);
    ASSERT_TRUE(found) << why;
    ASSERT_FALSE(found->empty());
    bool has_v4_loopback = false;
    for (const Address& a : *found) {
      EXPECT_EQ(a.port(), 80) << a.to_string();
      if (a.family() == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(a.data());
        EXPECT_EQ(ntohl(in->sin_addr.s_addr) >> 24, 127u) << a.to_string();
        has_v4_loopback = true;
      } else {
        ASSERT_EQ(a.family(), AF_INET6) << a.to_string();
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.data());
        EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) << a.to_string();
      }
    }
    EXPECT_TRUE(has_v4_loopback);
  });
}

TEST(AddressResolve, NumericFormsNeedNoLookup) {
  run_on(1, [] {
    for (const char* text : {"1.2.3.4:80", "tcp://[::1]:9", "unix:/some/path", "*:7"}) {
      tern::Result<std::vector<Address>> found = tern::net::resolve(text);
      ASSERT_TRUE(found) << text;
      ASSERT_EQ(found->size(), 1u) << text;
      EXPECT_EQ(found->front(), parsed(text)) << text;
    }
    tern::Result<std::vector<Address>> named = tern::net::resolve("tcp://localhost:81");
    ASSERT_TRUE(named);
    ASSERT_FALSE(named->empty());
    EXPECT_EQ(named->front().port(), 81);
  });
}

TEST(AddressResolve, ResolverFailuresCompareAsResolveErrors) {
  const std::error_code no_name(EAI_NONAME, tern::net::resolve_category());
  EXPECT_EQ(no_name, tern::net::ResolveError::host_not_found);
  EXPECT_EQ(tern::with_context(no_name, "resolve x"), tern::net::ResolveError::host_not_found);
  EXPECT_NE(no_name, tern::net::ResolveError::try_again);
  EXPECT_EQ(no_name.message(), ::gai_strerror(EAI_NONAME));
  EXPECT_STREQ(no_name.category().name(), "tern.resolve");
}

TEST(AddressParse, TheErrorCarriesTheExplanation) {
  tern::Result<Address> bad = Address::parse("127.0.0.1");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), std::errc::invalid_argument);
  EXPECT_EQ(bad.error().message(), "'127.0.0.1': missing port (expected host:port or [ipv6]:port)");
}

TEST(AddressResolve, GarbageFailsWithAMessage) {
  run_on(1, [] {
    // Not even host:port.
    std::string why;
    tern::Result<std::vector<Address>> found = tern::net::resolve("no port here", &why);
    ASSERT_FALSE(found);
    EXPECT_EQ(found.error(), std::errc::invalid_argument);
    EXPECT_NE(why.find("expected host:port"), std::string::npos) << why;
    EXPECT_NE(why.find("no port here"), std::string::npos) << why;

    why.clear();
    found = tern::net::resolve("localhost:99999", &why);
    ASSERT_FALSE(found);
    EXPECT_EQ(found.error(), std::errc::invalid_argument);
    EXPECT_EQ(why, "'localhost:99999': port '99999' is not a number from 0 to 65535");
    EXPECT_EQ(found.error().message(), why) << "the error says the same";

    // A name the resolver rejects without asking a DNS server (an empty label): a resolver
    // failure, in getaddrinfo's words, equal to no std::errc.
    why.clear();
    found = tern::net::resolve("no..such..host:80", &why);
    ASSERT_FALSE(found);
    EXPECT_EQ(tern::without_context(found.error()).category(), tern::net::resolve_category());
    EXPECT_NE(found.error(), std::errc::host_unreachable);
    EXPECT_EQ(found.error().message(),
              std::string("resolve no..such..host: ") + ::gai_strerror(found.error().value()));
    EXPECT_EQ(why, found.error().message());
  });
}

}  // namespace
