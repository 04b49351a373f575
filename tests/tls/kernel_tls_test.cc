// TlsContext's kernel_tls option over real loopback sockets, on the backend TERN_IO names (ctest
// runs this binary once per backend). Where the kernel offers the "tls" ULP the connections must
// take the kernel path; where it does not (the machines tern is developed on), they must fall
// back to user-space TLS silently and say so in tls.user_space_tls. Either way the bytes, the
// handshake deadline, cancellation and close_notify behave as without the option.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/fiber.h"
#include "tern/net/tcp_listener.h"
#include "tern/prof/counter.h"
#include "tern/tls/tls_context.h"
#include "tern/tls/tls_stream.h"
#include "tls_fixtures.h"
#include "tls_test_util.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::net::TcpStream;
using tern::tls::TlsContext;
using tern::tls::TlsStream;
using tern_test::bytes_of;
using tern_test::Fnv64;
using tern_test::patience;
using tern_test::run_on;
using tern_tls_test::certs;
using tern_tls_test::Server;

std::uint64_t counter(std::string_view name) {
  for (const tern::prof::Sample& sample : tern::prof::snapshot())
    if (sample.name == name) return sample.value;
  return 0;
}

// Whether this kernel lists the "tls" upper-layer protocol (kernel TLS) as available.
bool kernel_offers_tls() {
  std::ifstream file("/proc/sys/net/ipv4/tcp_available_ulp");
  std::string name;
  while (file >> name)
    if (name == "tls") return true;
  return false;
}

TlsContext server_context(bool kernel_tls) {
  return tern_tls_test::server_context("server", {.kernel_tls = kernel_tls});
}

TlsContext client_context(bool kernel_tls) {
  return tern_tls_test::client_context({.kernel_tls = kernel_tls});
}

tern::Result<TlsStream> connect(const Server& server, const TlsContext& context) {
  tern::Result<TcpStream> tcp = TcpStream::connect(server.address(), patience());
  if (!tcp) return tern::fail(tcp.error());
  return TlsStream::connect(std::move(*tcp), context, "localhost", patience());
}

class KernelTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs().ok); }
};

TEST_F(KernelTlsTest, EachConnectionIsCountedUnderThePathItTook) {
  const bool kernel = kernel_offers_tls();
  run_on(1, [kernel] {
    const std::uint64_t kernel_before = counter("tls.kernel_tls");
    const std::uint64_t user_before = counter("tls.user_space_tls");
    Server server(server_context(true));
    tern::Result<TlsStream> client = connect(server, client_context(true));
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(client->kernel_tls(), kernel);
    EXPECT_EQ(client->version(), "TLSv1.3");
    ASSERT_TRUE(client->write_all(bytes_of("over the kernel or not"), patience()));
    std::array<std::byte, 22> back;
    ASSERT_TRUE(client->read_exact(back, patience()));
    EXPECT_EQ(tern_test::text_of(back), "over the kernel or not");
    // Both ends asked for kernel TLS: the client and the server's connection are counted.
    EXPECT_EQ(counter("tls.kernel_tls") - kernel_before, kernel ? 2u : 0u);
    EXPECT_EQ(counter("tls.user_space_tls") - user_before, kernel ? 0u : 2u);
    ASSERT_TRUE(client->shutdown(SHUT_WR, patience()));
    std::array<std::byte, 16> buffer;
    tern::Result<std::size_t> end = client->read(buffer, patience());
    ASSERT_TRUE(end) << end.error().message();
    EXPECT_EQ(*end, 0u);  // the server's close_notify
  });
}

TEST_F(KernelTlsTest, WithoutTheOptionConnectionsStayInUserSpace) {
  run_on(1, [] {
    const std::uint64_t kernel_before = counter("tls.kernel_tls");
    const std::uint64_t user_before = counter("tls.user_space_tls");
    Server server(server_context(false));
    tern::Result<TlsStream> client = connect(server, client_context(false));
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_FALSE(client->kernel_tls());
    ASSERT_TRUE(client->write_all(bytes_of("x"), patience()));
    std::array<std::byte, 1> back;
    ASSERT_TRUE(client->read_exact(back, patience()));
    EXPECT_EQ(counter("tls.kernel_tls"), kernel_before);
    EXPECT_EQ(counter("tls.user_space_tls") - user_before, 2u);
  });
}

TEST_F(KernelTlsTest, MegabytesArriveIntactBothWaysAtOnce) {
  run_on(1, [] {
    Server server(server_context(true));
    tern::Result<TlsStream> client = connect(server, client_context(true));
    ASSERT_TRUE(client) << client.error().message();
    constexpr std::size_t kTotal = 4 << 20;
    Fnv64 sent_hash, received_hash;
    tern::Fiber writer = tern::spawn([&] {
      std::vector<std::byte> chunk(70'001);
      std::uint64_t state = 7;
      for (std::size_t sent = 0; sent < kTotal;) {
        std::span<std::byte> piece = std::span(chunk).first(std::min(chunk.size(), kTotal - sent));
        tern_test::fill_pattern(piece, state);
        sent_hash.update(piece);
        ASSERT_TRUE(client->write_all(piece, patience()));
        sent += piece.size();
      }
    });
    std::vector<std::byte> buffer(40'000);
    while (received_hash.size() < kTotal) {
      tern::Result<std::size_t> n = client->read(buffer, patience());
      ASSERT_TRUE(n) << n.error().message();
      ASSERT_GT(*n, 0u);
      received_hash.update(std::span(buffer).first(*n));
    }
    writer.join();
    EXPECT_EQ(received_hash.value(), sent_hash.value());
  });
}

TEST_F(KernelTlsTest, HandshakeOnTheSocketKeepsItsDeadline) {
  run_on(1, [] {
    tern::Result<tern::net::TcpListener> silent =
        tern::net::TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(silent);
    tern::Result<TcpStream> tcp = TcpStream::connect(*silent->local_address(), patience());
    ASSERT_TRUE(tcp);
    tern::Result<TcpStream> accepted = silent->accept(patience());  // and never answers
    ASSERT_TRUE(accepted);
    tern::Result<TlsStream> client = TlsStream::connect(std::move(*tcp), client_context(true),
                                                        "localhost", tern::deadline_after(100ms));
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error(), std::errc::timed_out) << client.error().message();
    EXPECT_NE(client.error().message().find("TLS handshake"), std::string::npos);
  });
}

TEST_F(KernelTlsTest, HandshakeOnTheSocketIsCancelledByInterrupt) {
  run_on(1, [] {
    tern::Result<tern::net::TcpListener> silent =
        tern::net::TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(silent);
    tern::Result<TcpStream> tcp = TcpStream::connect(*silent->local_address(), patience());
    ASSERT_TRUE(tcp);
    tern::Result<TcpStream> accepted = silent->accept(patience());
    ASSERT_TRUE(accepted);
    std::error_code error;
    tern::Fiber handshaker = tern::spawn([&] {
      tern::Result<TlsStream> client =
          TlsStream::connect(std::move(*tcp), client_context(true), "localhost", patience());
      error = client ? std::error_code() : client.error();
    });
    tern::this_fiber::yield();
    handshaker.interrupt();
    handshaker.join();
    EXPECT_EQ(error, std::errc::operation_canceled) << error.message();
  });
}

TEST_F(KernelTlsTest, AServerWithTheOptionRefusesAPlaintextClient) {
  run_on(1, [] {
    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    tern::Result<TcpStream> plain = TcpStream::connect(*listener->local_address(), patience());
    ASSERT_TRUE(plain);
    tern::Result<TcpStream> accepted = listener->accept(patience());
    ASSERT_TRUE(accepted);
    ASSERT_TRUE(plain->write_all(bytes_of("GET / HTTP/1.1\r\n\r\n"), patience()));
    tern::Result<TlsStream> server =
        TlsStream::accept(std::move(*accepted), server_context(true), patience());
    ASSERT_FALSE(server);
    EXPECT_NE(server.error().message().find("TLS handshake"), std::string::npos)
        << server.error().message();
  });
}

}  // namespace
