// tern::tls::TlsServer over real loopback sockets, under the backend TERN_IO names: bad input
// (plaintext, garbage, an oversized record, half a ClientHello and then silence, a client that
// leaves mid-handshake; after the handshake truncated, corrupt and oversized records and a close
// without close_notify; bad certificates on either side; renegotiation) closes that connection
// alone with a logged and counted reason while the server keeps serving; certificate reload
// while 100 connections keep echoing; and peers no one here wrote: openssl s_client and
// s_server, and Python's ssl module.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "net_test_util.h"
#include "reliability/reliability_util.h"
#include "tern/fiber/fiber.h"
#include "tern/io/offload.h"
#include "tern/tls/byte_stream.h"
#include "tern/tls/tls_context.h"
#include "tern/tls/tls_error.h"
#include "tern/tls/tls_server.h"
#include "tern/tls/tls_stream.h"
#include "tls_fixtures.h"
#include "tls_test_util.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::net::TcpStream;
using tern::tls::Certificate;
using tern::tls::ClientAuth;
using tern::tls::ClientConfig;
using tern::tls::ServerConfig;
using tern::tls::TlsContext;
using tern::tls::TlsErrc;
using tern::tls::TlsServer;
using tern::tls::TlsServerOptions;
using tern::tls::TlsStream;
using tern_test::bytes_of;
using tern_test::patience;
using tern_test::run_on;
using tern_test::text_of;
using tern_test::wait_for_condition;
using tern_tls_test::Certs;
using tern_tls_test::Child;

using tern_tls_test::certs;
using tern_tls_test::client_context;
using tern_tls_test::echo_handler;
using tern_tls_test::Server;
using tern_tls_test::server_context;

tern::Result<TlsStream> connect(const Server& server, const TlsContext& context) {
  tern::Result<TcpStream> tcp = TcpStream::connect(server.address(), patience());
  if (!tcp) return tern::fail(tcp.error());
  return TlsStream::connect(std::move(*tcp), context, "localhost", patience());
}

std::string round_trip(TlsStream& stream, const std::string& text) {
  if (tern::Result<void> sent = stream.write_all(bytes_of(text), patience()); !sent)
    return "write: " + sent.error().message();
  std::string back(text.size(), '\0');
  if (tern::Result<void> got =
          stream.read_exact(std::as_writable_bytes(std::span(back)), patience());
      !got)
    return "read: " + got.error().message();
  return back;
}

// Reads a raw connection until the server closes it (end of stream or reset): true if it did.
bool closed_by_server(TcpStream& stream) {
  std::array<std::byte, 4096> buffer;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buffer, patience());
    if (!n) return n.error() != std::errc::timed_out;
    if (*n == 0) return true;
  }
}

class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs().ok); }
};

TEST_F(TlsServerTest, BadInputClosesThatConnectionAndTheServerKeepsServing) {
  tern_test::LogCapture log;
  struct Case {
    std::string name;
    std::string bytes;
    bool then_close;  // the client leaves instead of waiting for the server
    std::uint64_t tern::tls::TlsServerStats::* counter;
    std::string reason;  // in the server's log line
  };
  const std::string half_hello =
      std::string("\x16\x03\x01\x01\x00\x01\x00\x00\xfc\x03\x03", 11) + std::string(40, '\x5a');
  const std::vector<Case> cases = {
      {"plaintext HTTP", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", false,
       &tern::tls::TlsServerStats::rejected_not_tls, "http request"},
      {"garbage", std::string(64, '\x07'), false, &tern::tls::TlsServerStats::rejected_not_tls,
       "wrong version number"},
      {"oversized record", std::string("\x16\x03\x01\xff\xff", 5) + std::string(100, 'a'), false,
       &tern::tls::TlsServerStats::rejected_not_tls, "packet length too long"},
      {"half a ClientHello, then silence", half_hello, false,
       &tern::tls::TlsServerStats::handshake_timeouts, "deadline exceeded"},
      {"half a ClientHello, then gone", half_hello, true,
       &tern::tls::TlsServerStats::handshake_closed, "before the handshake finished"},
  };
  run_on(1, [&] {
    TlsServerOptions options;
    options.handshake_timeout = 300ms;
    Server server(server_context(), echo_handler, options);
    TlsContext client = client_context();
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const std::uint64_t before = server.server().stats().*c.counter;
      tern::Result<TcpStream> raw = TcpStream::connect(server.address(), patience());
      ASSERT_TRUE(raw);
      ASSERT_TRUE(raw->write_all(bytes_of(c.bytes), patience()));
      if (c.then_close) {
        raw->close();
      } else {
        EXPECT_TRUE(closed_by_server(*raw));
      }
      EXPECT_TRUE(
          wait_for_condition([&] { return server.server().stats().*c.counter == before + 1; }));
      // Everyone else is still served.
      tern::Result<TlsStream> good = connect(server, client);
      ASSERT_TRUE(good) << good.error().message();
      EXPECT_EQ(round_trip(*good, "still here"), "still here");
      EXPECT_TRUE(good->shutdown(SHUT_WR, patience()));
    }
    const tern::tls::TlsServerStats stats = server.server().stats();
    EXPECT_EQ(stats.rejected_not_tls, 3u);
    EXPECT_EQ(stats.handshake_timeouts, 1u);
    EXPECT_EQ(stats.handshake_closed, 1u);
    EXPECT_EQ(stats.handshakes, cases.size());
    // Every good client ended with close_notify: none counted as truncated.
    EXPECT_TRUE(wait_for_condition([&] { return server.server().stats().tcp.open == 0; }));
    EXPECT_EQ(server.server().stats().truncated, 0u);
  });
  for (const Case& c : cases)
    EXPECT_TRUE(log.has_line({"TLS client 127.0.0.1:", "refused", c.reason})) << c.name;
}

// A client that connects and sends nothing takes no connection of the server's (the listener
// defers it until its ClientHello comes) unless defer_accept is off; clients that send their
// ClientHello are served meanwhile, and the silent one is once it speaks.
TEST_F(TlsServerTest, ASilentConnectWaitsInTheKernelUntilItsClientHello) {
  run_on(1, [] {
    for (const bool defer : {true, false}) {
      SCOPED_TRACE(defer ? "defer_accept" : "no defer_accept");
      TlsServerOptions options;
      options.defer_accept = defer;
      Server server(server_context(), echo_handler, options);
      TlsContext client = client_context();
      tern::Result<TcpStream> silent = TcpStream::connect(server.address(), patience());
      ASSERT_TRUE(silent);
      tern::Result<TlsStream> good = connect(server, client);
      ASSERT_TRUE(good) << good.error().message();
      EXPECT_EQ(round_trip(*good, "served"), "served");
      if (defer) {
        EXPECT_EQ(server.server().stats().tcp.accepted, 1u);
      } else {
        EXPECT_TRUE(wait_for_condition([&] { return server.server().stats().tcp.accepted == 2; }));
      }
      tern::Result<TlsStream> late =
          TlsStream::connect(std::move(*silent), client, "localhost", patience());
      ASSERT_TRUE(late) << late.error().message();
      EXPECT_EQ(round_trip(*late, "late"), "late");
      EXPECT_EQ(server.server().stats().tcp.accepted, 2u);
    }
  });
}

TEST_F(TlsServerTest, BadRecordsAfterTheHandshakeFailTheReadWithTheirReason) {
  tern_test::LogCapture log;
  run_on(1, [&] {
    std::vector<std::error_code> errors;
    Server server(server_context(), [&](TlsStream& stream) {
      std::array<std::byte, 1024> buffer;
      tern::Result<std::size_t> n = stream.read(buffer, patience());
      errors.push_back(n ? std::error_code() : n.error());
    });
    TlsContext context = client_context();
    struct Case {
      std::string bytes;
      bool half_close;
      TlsErrc expected;
      std::string reason;
    };
    const std::vector<Case> cases = {
        // A record cut short by the end of the stream.
        {std::string("\x17\x03\x03\x00\x40", 5) + std::string(10, 'r'), true, TlsErrc::truncated,
         "without close_notify"},
        // The end of the stream between records, without close_notify.
        {"", true, TlsErrc::truncated, "without close_notify"},
        // A whole record that does not decrypt.
        {std::string("\x17\x03\x03\x00\x20", 5) + std::string(32, '\0'), false, TlsErrc::protocol,
         "bad record mac"},
        // A record longer than TLS allows.
        {std::string("\x17\x03\x03\x48\x01", 5) + std::string(100, 'o'), false, TlsErrc::protocol,
         "length too long"},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.reason);
      tern::Result<TlsStream> client = connect(server, context);
      ASSERT_TRUE(client) << client.error().message();
      ASSERT_TRUE(client->tcp().write_all(bytes_of(c.bytes), patience()));
      if (c.half_close) {
        ASSERT_TRUE(client->tcp().shutdown(SHUT_WR));
      }
      const std::size_t expected = static_cast<std::size_t>(&c - cases.data()) + 1;
      ASSERT_TRUE(wait_for_condition([&] { return errors.size() == expected; }));
      EXPECT_EQ(errors.back(), c.expected) << errors.back().message();
      EXPECT_NE(errors.back().message().find(c.reason), std::string::npos)
          << errors.back().message();
      // The server closes that connection: the client reads its end.
      EXPECT_TRUE(closed_by_server(client->tcp()));
    }
    // Counted once each handler has returned, and logged with the reason.
    EXPECT_TRUE(wait_for_condition([&] {
      const tern::tls::TlsServerStats stats = server.server().stats();
      return stats.truncated == 2 && stats.protocol_errors == 2;
    }));
    EXPECT_EQ(server.server().stats().handshakes, cases.size());
    tern::Result<TlsStream> next = connect(server, context);
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_TRUE(next->write_all(bytes_of("fine"), patience()));
    ASSERT_TRUE(wait_for_condition([&] { return errors.size() == cases.size() + 1; }));
    EXPECT_FALSE(errors.back()) << errors.back().message();
  });
  EXPECT_TRUE(log.has_line({"TLS client 127.0.0.1:", "cut off", "without close_notify"}))
      << log.text();
  EXPECT_TRUE(log.has_line({"TLS client 127.0.0.1:", "cut off", "bad record mac"})) << log.text();
}

// Bad certificates on either side, as tern's server sees them. The client side: a client that
// trusts another CA refuses tern's certificate (expired, wrong-host and self-signed server
// certificates are tls_stream_test's RefusesBadServerCertificates). The server side, with
// client certificates required: a self-signed one is refused (missing, expired and unknown-CA
// ones are tls_stream_test's MutualTlsRequiresAVerifiedClientCertificate); one whose names are
// another host's is let in, since TLS checks no client names, with its names in
// peer_identity() for the application to authorize. Each refusal is counted and logged.
TEST_F(TlsServerTest, BadCertificatesOnEitherSideAreRefusedAndCounted) {
  tern_test::LogCapture log;
  run_on(1, [] {
    std::vector<tern::tls::PeerIdentity> admitted;
    Server server(
        server_context("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::require}),
        [&](TlsStream& stream) {
          admitted.push_back(stream.peer_identity());
          echo_handler(stream);
        });
    auto with_certificate = [](const std::string& name, std::string ca = certs().ca()) {
      return client_context(
          {.ca_file = std::move(ca),
           .certificate = {Certificate::files(certs().crt(name), certs().key(name))}});
    };
    // Refused at connect (the client's own check) or at the first read (TLS 1.3 tells a
    // client that the server refused its certificate after the client's handshake is done).
    auto refusal = [&](const TlsContext& context) -> std::error_code {
      tern::Result<TlsStream> client = connect(server, context);
      if (!client) return client.error();
      (void)client->write_all(bytes_of("x"), patience());
      std::array<std::byte, 4> buffer;
      tern::Result<std::size_t> n = client->read(buffer, patience());
      return n ? std::error_code() : n.error();
    };

    const std::error_code other_ca = refusal(with_certificate("client", certs().crt("otherca")));
    EXPECT_EQ(other_ca, TlsErrc::certificate) << other_ca.message();
    EXPECT_NE(other_ca.message().find("certificate verify failed"), std::string::npos)
        << other_ca.message();
    EXPECT_TRUE(
        wait_for_condition([&] { return server.server().stats().rejected_certificate == 1; }));

    const std::error_code self_signed = refusal(with_certificate("selfsigned"));
    EXPECT_EQ(self_signed, TlsErrc::certificate) << self_signed.message();
    EXPECT_TRUE(
        wait_for_condition([&] { return server.server().stats().rejected_certificate == 2; }));

    tern::Result<TlsStream> other_host = connect(server, with_certificate("wronghost"));
    ASSERT_TRUE(other_host) << other_host.error().message();
    EXPECT_EQ(round_trip(*other_host, "names are the application's to check"),
              "names are the application's to check");
    ASSERT_EQ(admitted.size(), 1u);
    EXPECT_TRUE(admitted[0].verified);
    EXPECT_EQ(admitted[0].names, std::vector<std::string>{"other.example"});
    EXPECT_TRUE(other_host->shutdown(SHUT_WR, patience()));
    EXPECT_EQ(server.server().stats().rejected_certificate, 2u);
  });
  EXPECT_TRUE(log.has_line({"TLS client 127.0.0.1:", "refused", "unknown ca"})) << log.text();
  EXPECT_TRUE(log.has_line({"TLS client 127.0.0.1:", "refused", "self-signed certificate"}))
      << log.text();
}

TEST_F(TlsServerTest, ReloadUnderLoadKeepsConnectionsAndServesTheNewCertificate) {
  run_on(2, [] {
    Server server(server_context());
    TlsContext context = client_context();
    constexpr int kConnections = 100;
    std::atomic<int> round_trips_after_reload{0};
    std::atomic<int> connected{0};
    std::atomic<bool> reloaded{false};
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::vector<tern::Fiber> clients;
    for (int i = 0; i < kConnections; ++i) {
      clients.push_back(tern::spawn([&, i] {
        tern::Result<TlsStream> client = connect(server, context);
        if (!client) {
          ADD_FAILURE() << client.error().message();
          failures.fetch_add(1);
          return;
        }
        connected.fetch_add(1);
        bool counted = false;
        while (!stop.load()) {
          const std::string text = "connection " + std::to_string(i);
          if (round_trip(*client, text) != text) {
            failures.fetch_add(1);
            return;
          }
          if (reloaded.load() && !counted) {
            counted = true;
            round_trips_after_reload.fetch_add(1);
          }
        }
        EXPECT_TRUE(client->shutdown(SHUT_WR, patience()));
      }));
    }
    ASSERT_TRUE(wait_for_condition([&] { return connected.load() == kConnections; }));
    ASSERT_TRUE(server.server().context().reload(
        {Certificate::files(certs().crt("server2"), certs().key("server2"))}));
    reloaded.store(true);
    tern::Result<TlsStream> fresh = connect(server, client_context({.session_resumption = false}));
    ASSERT_TRUE(fresh) << fresh.error().message();
    EXPECT_EQ(fresh->peer_identity().subject, "CN=localhost,O=gen2");
    EXPECT_TRUE(
        wait_for_condition([&] { return round_trips_after_reload.load() == kConnections; }));
    stop.store(true);
    for (tern::Fiber& fiber : clients) fiber.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(server.server().stats().handshakes, kConnections + 1u);
  });
}

// Runs fn (blocking: child processes) on the offload pool while the server's fibers run.
template <typename Fn>
auto blocking(Fn fn) {
  return tern::io::offload(std::move(fn));
}

TEST_F(TlsServerTest, OpensslSClientTalksToTernsServer) {
  run_on(1, [] {
    std::vector<tern::tls::PeerIdentity> peers;
    Server server(
        server_context("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::require}),
        [&](TlsStream& stream) {
          peers.push_back(stream.peer_identity());
          if (stream.write_all(bytes_of("hello from tern\n"), patience())) echo_handler(stream);
        });
    for (const std::string version : {"-tls1_3", "-tls1_2"}) {
      SCOPED_TRACE(version);
      const std::string output = blocking([&] {
        Child s_client({"openssl", "s_client", "-connect", "127.0.0.1:" + server.port(),
                        "-servername", "localhost", "-CAfile", certs().ca(), "-cert",
                        certs().crt("client"), "-key", certs().key("client"),
                        "-verify_return_error", version});
        if (s_client.read_until("hello from tern", 20s)) {
          s_client.write("ping from s_client\n");
          s_client.read_until("ping from s_client", 20s);
        }
        s_client.close_stdin();
        s_client.finish(20s);
        return s_client.output();
      });
      EXPECT_NE(output.find("Verify return code: 0 (ok)"), std::string::npos) << output;
      EXPECT_NE(output.find("ping from s_client"), std::string::npos) << output;
      EXPECT_NE(output.find(version == "-tls1_3" ? "TLSv1.3" : "TLSv1.2"), std::string::npos);
    }
    ASSERT_EQ(peers.size(), 2u);
    EXPECT_EQ(peers[0].subject, "CN=client,O=tern");
    EXPECT_TRUE(peers[1].verified);
    // Without its certificate s_client is refused, and counted.
    const std::string refused = blocking([&] {
      Child s_client({"openssl", "s_client", "-connect", "127.0.0.1:" + server.port(),
                      "-servername", "localhost", "-CAfile", certs().ca()});
      s_client.write("x\n");
      s_client.finish(20s);
      return s_client.output();
    });
    EXPECT_NE(refused.find("alert"), std::string::npos) << refused;
    EXPECT_TRUE(
        wait_for_condition([&] { return server.server().stats().rejected_certificate == 1; }));
  });
}

TEST_F(TlsServerTest, RenegotiationEndsThatConnectionAndIsCounted) {
  run_on(1, [] {
    std::vector<std::error_code> errors;
    Server server(server_context(), [&](TlsStream& stream) {
      std::array<std::byte, 4096> buffer;
      for (;;) {
        tern::Result<std::size_t> n = stream.read(buffer, patience());
        if (!n) {
          errors.push_back(n.error());
          return;
        }
        if (*n == 0 || !stream.write_all(std::span(buffer).first(*n), patience())) return;
      }
    });
    // s_client asks for a new TLS 1.2 handshake when a line reads "R".
    blocking([&] {
      Child s_client({"openssl", "s_client", "-connect", "127.0.0.1:" + server.port(),
                      "-servername", "localhost", "-CAfile", certs().ca(), "-tls1_2"});
      s_client.write("before\n");
      s_client.read_until("before", 20s);
      s_client.write("R\n");
      s_client.finish(20s);
    });
    ASSERT_TRUE(wait_for_condition([&] { return errors.size() == 1; }));
    EXPECT_EQ(errors[0], TlsErrc::protocol) << errors[0].message();
    EXPECT_NE(errors[0].message().find("renegotiate"), std::string::npos) << errors[0].message();
    EXPECT_TRUE(wait_for_condition([&] { return server.server().stats().protocol_errors == 1; }));
    // The server serves the next client.
    tern::Result<TlsStream> next = connect(server, client_context());
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_EQ(round_trip(*next, "next"), "next");
  });
}

TEST_F(TlsServerTest, WatchedFilesAreReloadedWhenTheyChange) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(certs().dir) / "watched";
  fs::create_directories(dir);
  const std::string crt = dir / "server.crt", key = dir / "server.key";
  fs::copy_file(certs().crt("server"), crt, fs::copy_options::overwrite_existing);
  fs::copy_file(certs().key("server"), key, fs::copy_options::overwrite_existing);
  run_on(1, [&] {
    tern::Result<TlsContext> context =
        TlsContext::server({.certificates = {Certificate::files(crt, key)}});
    ASSERT_TRUE(context) << context.error().message();
    TlsServerOptions options;
    options.watch_files = 20ms;
    Server server(*context, echo_handler, options);
    TlsContext client = client_context({.session_resumption = false});
    tern::Result<TlsStream> before = connect(server, client);
    ASSERT_TRUE(before) << before.error().message();
    EXPECT_EQ(before->peer_identity().subject, "CN=localhost,O=gen1");
    // Replaced one file at a time, as a deployment would: in between, the pair does not match
    // and the old certificate stays until both are there.
    fs::copy_file(certs().crt("server2"), dir / "next.crt", fs::copy_options::overwrite_existing);
    fs::copy_file(certs().key("server2"), dir / "next.key", fs::copy_options::overwrite_existing);
    fs::rename(dir / "next.crt", crt);
    fs::rename(dir / "next.key", key);
    ASSERT_TRUE(wait_for_condition([&] { return server.server().stats().reloads >= 1; }));
    tern::Result<TlsStream> after = connect(server, client);
    ASSERT_TRUE(after) << after.error().message();
    EXPECT_EQ(after->peer_identity().subject, "CN=localhost,O=gen2");
    EXPECT_EQ(round_trip(*before, "old connection"), "old connection");
  });
}

TEST_F(TlsServerTest, MinimumVersionRefusesOlderClients) {
  run_on(1, [] {
    Server server(server_context("server", {.min_version = tern::tls::TlsVersion::tls1_3}));
    const std::string output = blocking([&] {
      Child s_client({"openssl", "s_client", "-connect", "127.0.0.1:" + server.port(),
                      "-servername", "localhost", "-CAfile", certs().ca(), "-tls1_2"});
      s_client.close_stdin();
      s_client.finish(20s);
      return s_client.output();
    });
    EXPECT_NE(output.find("alert protocol version"), std::string::npos) << output;
    EXPECT_TRUE(wait_for_condition([&] { return server.server().stats().rejected_not_tls == 1; }));
    tern::Result<TlsStream> modern = connect(server, client_context());
    ASSERT_TRUE(modern) << modern.error().message();
    EXPECT_EQ(modern->version(), "TLSv1.3");
  });
}

TEST_F(TlsServerTest, TernsClientTalksToOpensslSServer) {
  run_on(1, [] {
    for (const std::string certificate : {"server", "expired"}) {
      SCOPED_TRACE(certificate);
      const int port = tern_tls_test::free_port();
      auto s_server = std::make_unique<Child>(std::vector<std::string>{
          "openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port), "-cert",
          certs().crt(certificate), "-key", certs().key(certificate), "-rev"});
      ASSERT_TRUE(blocking([&] { return s_server->read_until("ACCEPT", 20s); }))
          << s_server->output();
      tern::Result<TcpStream> tcp =
          TcpStream::connect(Address::loopback(static_cast<std::uint16_t>(port)), patience());
      ASSERT_TRUE(tcp) << tcp.error().message();
      tern::Result<TlsStream> client =
          TlsStream::connect(std::move(*tcp), client_context(), "localhost", patience());
      if (certificate == "expired") {
        ASSERT_FALSE(client);
        EXPECT_EQ(client.error(), TlsErrc::certificate);
        EXPECT_NE(client.error().message().find("certificate has expired"), std::string::npos)
            << client.error().message();
      } else {
        ASSERT_TRUE(client) << client.error().message();
        ASSERT_TRUE(client->write_all(bytes_of("hello\n"), patience()));
        std::array<std::byte, 6> reply;
        ASSERT_TRUE(client->read_exact(reply, patience()));
        EXPECT_EQ(text_of(reply), "olleh\n");  // s_server -rev reverses each line
      }
      blocking([&] { s_server.reset(); });  // killed and reaped
    }
  });
}

TEST_F(TlsServerTest, PythonSslClientEchoes) {
  run_on(1, [] {
    Server server(server_context());
    Server self_signed(server_context("selfsigned"));
    auto python = [&](const Server& target) {
      return blocking([&] {
        Child client({TERN_PYTHON, TERN_TLS_CLIENT_PY, "127.0.0.1", target.port(), certs().ca(),
                      "localhost", "30"});
        const int status = client.finish(30s);
        return std::to_string(status) + " " + client.output();
      });
    };
    const std::string ok = python(server);
    EXPECT_EQ(ok.rfind("0 ok TLSv1.3", 0), 0u) << ok;
    const std::string refused = python(self_signed);
    EXPECT_EQ(refused.rfind("1 failed", 0), 0u) << refused;
    EXPECT_NE(refused.find("CERTIFICATE_VERIFY_FAILED"), std::string::npos) << refused;
  });
}

}  // namespace
