// tern::tls contexts and streams over real loopback sockets, on the backend TERN_IO names (ctest
// runs this binary once per backend): echo and data integrity in both directions at once,
// verification of the server (expired, wrong host, self-signed, IP names) and of clients
// (mutual TLS), ALPN, SNI, session resumption, PEM in memory, configuration errors, deadlines,
// cancellation, close_notify against truncation, and the stream-generic framing code. Every test
// runs twice: with user-space TLS, and with the kernel_tls option on both contexts (the handshake
// on the socket, then the kernel's records where it offers the "tls" ULP, else a silent fallback
// to user space that tls.user_space_tls counts).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/fiber.h"
#include "tern/prof/counter.h"
#include "tern/tls/byte_stream.h"
#include "tern/tls/tls_context.h"
#include "tern/tls/tls_error.h"
#include "tern/tls/tls_server.h"
#include "tern/tls/tls_stream.h"
#include "tls_fixtures.h"
#include "tls_test_util.h"
#include "wait_for_condition.h"

namespace {

using namespace std::chrono_literals;
using tern::net::TcpStream;
using tern::tls::Certificate;
using tern::tls::ClientAuth;
using tern::tls::ClientConfig;
using tern::tls::ServerConfig;
using tern::tls::TlsContext;
using tern::tls::TlsErrc;
using tern::tls::TlsServer;
using tern::tls::TlsStream;
using tern_test::bytes_of;
using tern_test::Defer;
using tern_test::Fnv64;
using tern_test::patience;
using tern_test::run_on;
using tern_test::text_of;
using tern_tls_test::Certs;

using tern_tls_test::certs;
using tern_tls_test::echo_handler;
using tern_tls_test::Server;

tern::Result<TlsStream> connect(const Server& server, const TlsContext& context,
                                const std::string& name = "localhost") {
  tern::Result<TcpStream> tcp = TcpStream::connect(server.address(), patience());
  if (!tcp) return tern::fail(tcp.error());
  return TlsStream::connect(std::move(*tcp), context, name, patience());
}

// Writes text and reads the same number of bytes back.
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

// Writes `total` patterned bytes (seeded by `seed`) through write(piece), the i-th piece
// piece_size(i) bytes long (at most the scratch's size), hashing them into `hash`.
template <typename PieceSize, typename Write>
void send_patterned(std::size_t total, std::uint64_t seed, Fnv64& hash,
                    std::span<std::byte> scratch, PieceSize piece_size, Write write) {
  for (std::size_t sent = 0, i = 0; sent < total; ++i) {
    std::span<std::byte> piece = scratch.first(std::min(piece_size(i), total - sent));
    tern_test::fill_pattern(piece, seed);
    hash.update(piece);
    tern::Result<void> wrote = write(piece);
    ASSERT_TRUE(wrote) << wrote.error().message();
    sent += piece.size();
  }
}

// Reads through read(buffer) until `hash` has taken in `total` bytes.
template <typename Read>
void receive_hashed(std::size_t total, Fnv64& hash, std::span<std::byte> buffer, Read read) {
  while (hash.size() < total) {
    tern::Result<std::size_t> n = read(buffer);
    ASSERT_TRUE(n) << n.error().message();
    ASSERT_GT(*n, 0u);
    hash.update(buffer.first(*n));
  }
}

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

// Runs `call` in a fiber of its own, interrupts it once it waits, and returns its error.
std::error_code interrupted(const std::function<std::error_code()>& call) {
  std::error_code error;
  tern::Fiber fiber = tern::spawn([&] { error = call(); });
  tern::this_fiber::yield();
  fiber.interrupt();
  fiber.join();
  return error;
}

// The parameter: whether both ends ask for kernel TLS (ServerConfig/ClientConfig::kernel_tls).
class TlsStreamTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { ASSERT_TRUE(certs().ok); }
  bool kernel_tls() const { return GetParam(); }
  // The test certificate `name`, with this run's kernel_tls.
  TlsContext server_context(const std::string& name = "server", ServerConfig config = {}) const {
    config.kernel_tls = kernel_tls();
    return tern_tls_test::server_context(name, std::move(config));
  }
  // A client trusting the test CA (unless config names its own), with this run's kernel_tls.
  TlsContext client_context(ClientConfig config = {}) const {
    config.kernel_tls = kernel_tls();
    return tern_tls_test::client_context(std::move(config));
  }
};

INSTANTIATE_TEST_SUITE_P(RecordPath, TlsStreamTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "KernelTlsOption" : "UserSpace");
                         });

TEST_P(TlsStreamTest, EchoesAndClosesWithCloseNotify) {
  run_on(1, [this] {
    Server server(server_context());
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(client->version(), "TLSv1.3");
    EXPECT_EQ(round_trip(*client, "hello over tls"), "hello over tls");
    tern::tls::PeerIdentity peer = client->peer_identity();
    EXPECT_TRUE(peer.has_certificate);
    EXPECT_TRUE(peer.verified);
    EXPECT_EQ(peer.subject, "CN=localhost,O=gen1");
    EXPECT_EQ(peer.names, (std::vector<std::string>{"localhost", "127.0.0.1"}));
    ASSERT_TRUE(client->shutdown(SHUT_WR, patience()));
    std::array<std::byte, 16> buffer;
    tern::Result<std::size_t> end = client->read(buffer, patience());
    ASSERT_TRUE(end) << end.error().message();
    EXPECT_EQ(*end, 0u);  // the server's close_notify
  });
}

TEST_P(TlsStreamTest, MovesMegabytesBothWaysAtOnce) {
  run_on(1, [this] {
    Server server(server_context());
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    constexpr std::size_t kTotal = 8 << 20;
    Fnv64 sent_hash, received_hash;
    tern::Fiber writer = tern::spawn([&] {
      std::vector<std::byte> chunk(100'003);
      send_patterned(
          kTotal, 42, sent_hash, chunk, [&](std::size_t) { return chunk.size(); },
          [&, i = std::size_t{0}](std::span<std::byte> piece) mutable {
            // Alternate the gather and the plain writes: both keep the byte order.
            const std::size_t half = piece.size() / 2;
            iovec iov[2] = {{piece.data(), half}, {piece.data() + half, piece.size() - half}};
            return i++ % 2 == 0 ? client->writev_all(iov, patience())
                                : client->write_all(piece, patience());
          });
    });
    std::vector<std::byte> buffer(65536);
    receive_hashed(kTotal, received_hash, buffer, [&](std::span<std::byte> into) {
      const std::size_t third = into.size() / 3;
      iovec iov[2] = {{into.data(), third}, {into.data() + third, into.size() - third}};
      return client->readv(iov, patience());
    });
    writer.join();
    EXPECT_EQ(received_hash.value(), sent_hash.value());
  });
}

// Writes of one record at most leave from OpenSSL's buffer as they are sealed; when the socket
// takes only part of one, the rest is queued and sent before anything written after it.
TEST_P(TlsStreamTest, OneRecordWritesKeepTheirOrderWhenTheSocketFills) {
  run_on(1, [this] {
    Server server(server_context());
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    constexpr std::size_t kTotal = 8 << 20;
    constexpr std::array<std::size_t, 4> kSizes = {16384, 1, 5000, 16383};
    Fnv64 sent_hash, received_hash;
    tern::Fiber writer = tern::spawn([&] {
      std::vector<std::byte> scratch(16384);
      send_patterned(
          kTotal, 11, sent_hash, scratch, [&](std::size_t i) { return kSizes[i % kSizes.size()]; },
          [&](std::span<std::byte> piece) { return client->write_all(piece, patience()); });
    });
    // Small reads, so the echo lags and the sockets fill up.
    std::vector<std::byte> buffer(3000);
    receive_hashed(kTotal, received_hash, buffer,
                   [&](std::span<std::byte> into) { return client->read(into, patience()); });
    writer.join();
    EXPECT_EQ(received_hash.value(), sent_hash.value());
    EXPECT_EQ(client->unsent(), 0u);
  });
}

TEST_P(TlsStreamTest, RefusesBadServerCertificates) {
  struct Case {
    std::string certificate;
    std::string name;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"expired", "localhost", "certificate has expired"},
      {"wronghost", "localhost", "hostname mismatch"},
      {"selfsigned", "localhost", "self-signed certificate"},
      {"server", "alt.example", "hostname mismatch"},
      {"server", "127.0.0.2", "IP address mismatch"},
  };
  run_on(1, [&] {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.certificate + " as " + c.name);
      Server server(server_context(c.certificate));
      tern::Result<TlsStream> client = connect(server, client_context(), c.name);
      ASSERT_FALSE(client);
      EXPECT_EQ(client.error(), TlsErrc::certificate);
      EXPECT_NE(client.error().message().find(c.reason), std::string::npos)
          << client.error().message();
      EXPECT_TRUE(tern_test::wait_for_condition(
          [&] { return server.server().stats().rejected_certificate == 1; }));
    }
  });
}

TEST_P(TlsStreamTest, VerifiesAnIpAddressAgainstTheIpSan) {
  run_on(1, [this] {
    Server server(server_context());
    tern::Result<TlsStream> client = connect(server, client_context(), "127.0.0.1");
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(client->server_name(), "");  // no SNI for an address
    EXPECT_EQ(round_trip(*client, "ip"), "ip");
  });
}

TEST_P(TlsStreamTest, NoVerificationAcceptsAnyServer) {
  run_on(1, [this] {
    Server server(server_context("selfsigned"));
    tern::Result<TlsStream> client =
        connect(server, client_context({.verify_peer = false}), "anything");
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_FALSE(client->peer_identity().verified);
    EXPECT_EQ(round_trip(*client, "x"), "x");
  });
}

TEST_P(TlsStreamTest, MutualTlsRequiresAVerifiedClientCertificate) {
  run_on(1, [this] {
    std::optional<tern::tls::PeerIdentity> seen;
    Server server(
        server_context("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::require}),
        [&](TlsStream& stream) {
          seen = stream.peer_identity();
          echo_handler(stream);
        });
    // With a certificate: the server sees who the client is.
    TlsContext with_certificate = client_context(
        {.certificate = {Certificate::files(certs().crt("client"), certs().key("client"))}});
    tern::Result<TlsStream> client = connect(server, with_certificate);
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(round_trip(*client, "me"), "me");
    ASSERT_TRUE(seen.has_value());
    EXPECT_TRUE(seen->verified);
    EXPECT_EQ(seen->subject, "CN=client,O=tern");
    EXPECT_EQ(seen->names, std::vector<std::string>{"client.tern.test"});

    // Without one, with one from an unknown CA, or with an expired one: refused (in TLS 1.3 the
    // client learns it at its first read).
    for (TlsContext context :
         {client_context(),
          client_context({.certificate = {Certificate::files(certs().crt("otherca_client"),
                                                             certs().key("otherca_client"))}}),
          client_context({.certificate = {Certificate::files(certs().crt("expired"),
                                                             certs().key("expired"))}})}) {
      tern::Result<TlsStream> refused = connect(server, context);
      if (refused) {
        (void)refused->write_all(bytes_of("x"), patience());
        std::array<std::byte, 4> buffer;
        tern::Result<std::size_t> n = refused->read(buffer, patience());
        ASSERT_FALSE(n);
        EXPECT_EQ(n.error(), TlsErrc::certificate) << n.error().message();
      } else {
        EXPECT_EQ(refused.error(), TlsErrc::certificate) << refused.error().message();
      }
    }
    EXPECT_TRUE(tern_test::wait_for_condition(
        [&] { return server.server().stats().rejected_certificate == 3; }));
    EXPECT_EQ(server.server().stats().handshakes, 1u);
  });
}

TEST_P(TlsStreamTest, RequestedClientCertificateIsOptional) {
  run_on(1, [this] {
    std::optional<tern::tls::PeerIdentity> seen;
    Server server(
        server_context("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::request}),
        [&](TlsStream& stream) {
          seen = stream.peer_identity();
          echo_handler(stream);
        });
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(round_trip(*client, "anonymous"), "anonymous");
    ASSERT_TRUE(seen.has_value());
    EXPECT_FALSE(seen->has_certificate);
  });
}

// The chain after the leaf: the intermediate given in the certificate file is sent as it is,
// and a leaf-only file gets its chain from the server's CA bundle (built once per context), as
// every handshake would have built it; either way a client trusting only the root verifies it.
TEST_P(TlsStreamTest, SendsTheIntermediateOfTheChain) {
  run_on(1, [this] {
    ServerConfig given;
    given.certificates = {
        Certificate::files(certs().dir + "/chained_full.crt", certs().key("chained"))};
    given.kernel_tls = kernel_tls();
    tern::Result<TlsContext> from_file = TlsContext::server(std::move(given));
    ASSERT_TRUE(from_file) << from_file.error().message();
    ServerConfig built = {.ca_file = certs().dir + "/ca_and_intermediate.crt",
                          .client_auth = ClientAuth::request};
    built.certificates = {Certificate::files(certs().crt("chained"), certs().key("chained"))};
    built.kernel_tls = kernel_tls();
    tern::Result<TlsContext> from_store = TlsContext::server(std::move(built));
    ASSERT_TRUE(from_store) << from_store.error().message();
    for (const TlsContext& context : {*from_file, *from_store}) {
      Server server(context);
      tern::Result<TlsStream> client = connect(server, client_context());
      ASSERT_TRUE(client) << client.error().message();
      EXPECT_TRUE(client->peer_identity().verified);
      EXPECT_EQ(round_trip(*client, "chain"), "chain");
    }
    // The leaf alone, with nothing to build its chain from: the client cannot verify it.
    Server alone(server_context("chained"));
    tern::Result<TlsStream> refused = connect(alone, client_context());
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), TlsErrc::certificate) << refused.error().message();
  });
}

TEST_P(TlsStreamTest, NegotiatesAlpn) {
  run_on(1, [this] {
    std::string server_side;
    Server server(server_context("server", {.alpn = {"h2", "tern/1"}}), [&](TlsStream& stream) {
      server_side = stream.alpn();
      echo_handler(stream);
    });
    tern::Result<TlsStream> client =
        connect(server, client_context({.alpn = {"tern/1", "http/1.1"}}));
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(client->alpn(), "tern/1");
    EXPECT_EQ(round_trip(*client, "a"), "a");
    EXPECT_EQ(server_side, "tern/1");
    // Nothing in common: the server refuses (no_application_protocol).
    tern::Result<TlsStream> refused = connect(server, client_context({.alpn = {"smtp"}}));
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("no application protocol"), std::string::npos)
        << refused.error().message();
  });
}

TEST_P(TlsStreamTest, ChoosesTheCertificateBySni) {
  run_on(1, [this] {
    std::vector<std::string> names;
    Server server(server_context("server", {.certificates = {Certificate::files(
                                                certs().crt("alt"), certs().key("alt"))}}),
                  [&](TlsStream& stream) {
                    names.push_back(stream.server_name());
                    echo_handler(stream);
                  });
    TlsContext context = client_context();
    tern::Result<TlsStream> alt = connect(server, context, "alt.example");
    ASSERT_TRUE(alt) << alt.error().message();
    EXPECT_EQ(alt->peer_identity().subject, "CN=alt.example");
    EXPECT_EQ(round_trip(*alt, "alt"), "alt");
    tern::Result<TlsStream> main = connect(server, context, "localhost");
    ASSERT_TRUE(main) << main.error().message();
    EXPECT_EQ(main->peer_identity().subject, "CN=localhost,O=gen1");
    EXPECT_EQ(round_trip(*main, "main"), "main");
    EXPECT_EQ(names, (std::vector<std::string>{"alt.example", "localhost"}));
  });
}

TEST_P(TlsStreamTest, ResumesSessionsAcrossAServerReload) {
  run_on(1, [this] {
    Server server(server_context());
    TlsContext context = client_context();
    auto once = [&] {
      tern::Result<TlsStream> client = connect(server, context);
      EXPECT_TRUE(client) << client.error().message();
      if (!client) return false;
      EXPECT_EQ(round_trip(*client, "t"), "t");  // the ticket arrives with the first reply
      return client->resumed();
    };
    EXPECT_FALSE(once());
    EXPECT_TRUE(once());
    ASSERT_TRUE(server.server().context().reload(
        {Certificate::files(certs().crt("server2"), certs().key("server2"))}));
    EXPECT_TRUE(once());  // the ticket keys survive the reload
    EXPECT_TRUE(
        tern_test::wait_for_condition([&] { return server.server().stats().resumed == 2; }));
    TlsContext fresh = client_context({.session_resumption = false});
    tern::Result<TlsStream> full = connect(server, fresh);
    ASSERT_TRUE(full) << full.error().message();
    EXPECT_FALSE(full->resumed());
    EXPECT_EQ(full->peer_identity().subject, "CN=localhost,O=gen2");
  });
}

TEST_P(TlsStreamTest, ConnectionsOfferingTheSameTicketAtOnceAllResume) {
  run_on(1, [this] {
    Server server(server_context());
    TlsContext context = client_context();
    tern::Result<TlsStream> first = connect(server, context);
    ASSERT_TRUE(first) << first.error().message();
    EXPECT_EQ(round_trip(*first, "a"), "a");  // brings the ticket
    // OpenSSL marks a TLS 1.3 session used up once a client resumed it. The second and third
    // connections offer the same ticket (the second's new one has not arrived: it comes with
    // its first reply), and the third must still resume.
    tern::Result<TlsStream> second = connect(server, context);
    ASSERT_TRUE(second) << second.error().message();
    EXPECT_TRUE(second->resumed());
    tern::Result<TlsStream> third = connect(server, context);
    ASSERT_TRUE(third) << third.error().message();
    EXPECT_TRUE(third->resumed());
    EXPECT_EQ(round_trip(*second, "b"), "b");
    EXPECT_EQ(round_trip(*third, "c"), "c");
  });
}

// Each round makes a fresh client context, whose CA certificate no handshake has used yet, and
// two threads, each with a runtime of its own, connect with it at once; they share nothing but
// the context. OpenSSL caches a certificate's extensions in the first handshake that uses it,
// and a later one on another thread reads them past a flag ThreadSanitizer cannot see, which it
// reported as a race (in tern-bench's TLS RPC run too); the context now caches them when it is
// made. Without that, this test fails under ThreadSanitizer in most runs.
TEST_P(TlsStreamTest, FirstHandshakesOfAContextOnTwoThreadsAtOnceAllVerify) {
  run_on(1, [this] {
    Server server(server_context());
    for (int round = 0; round < 16; ++round) {
      TlsContext context = client_context({.session_resumption = false});
      std::array<std::string, 2> outcomes;
      std::atomic<int> finished{0};
      std::vector<std::thread> threads;
      for (std::string& outcome : outcomes) {
        threads.emplace_back([&] {
          run_on(1, [&] {
            tern::Result<TlsStream> client = connect(server, context);
            outcome = client ? round_trip(*client, "v") : client.error().message();
          });
          finished.fetch_add(1);
        });
      }
      EXPECT_TRUE(
          tern_test::wait_until_condition([&] { return finished.load() == 2; }, patience()));
      for (std::thread& thread : threads) thread.join();
      EXPECT_EQ(outcomes[0], "v") << "round " << round;
      EXPECT_EQ(outcomes[1], "v") << "round " << round;
    }
  });
}

TEST_P(TlsStreamTest, WithoutReissuedTicketsAClientResumesWithTheTicketItHas) {
  run_on(1, [this] {
    Server server(server_context("server", {.reissue_tickets = false}));
    TlsContext context = client_context();
    for (int i = 0; i < 4; ++i) {
      tern::Result<TlsStream> client = connect(server, context);
      ASSERT_TRUE(client) << client.error().message();
      EXPECT_EQ(client->resumed(), i > 0) << "connection " << i;
      EXPECT_EQ(round_trip(*client, "r"), "r");
    }
    EXPECT_TRUE(
        tern_test::wait_for_condition([&] { return server.server().stats().resumed == 3; }));
  });
}

TEST_P(TlsStreamTest, LoadsPemFromMemory) {
  using tern_tls_test::read_file;
  run_on(1, [this] {
    tern::Result<TlsContext> server_ctx =
        TlsContext::server({.certificates = {Certificate::pem(read_file(certs().crt("server")),
                                                              read_file(certs().key("server")))},
                            .kernel_tls = kernel_tls()});
    ASSERT_TRUE(server_ctx) << server_ctx.error().message();
    Server server(*server_ctx);
    tern::Result<TlsStream> client =
        connect(server, client_context({.ca_pem = read_file(certs().ca())}));
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(round_trip(*client, "pem"), "pem");
  });
}

TEST_P(TlsStreamTest, ConfigurationErrorsSayWhy) {
  tern::Result<TlsContext> mismatch = TlsContext::server(
      {.certificates = {Certificate::files(certs().crt("server"), certs().key("client"))}});
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error(), TlsErrc::config);
  EXPECT_NE(mismatch.error().message().find("key values mismatch"), std::string::npos)
      << mismatch.error().message();

  tern::Result<TlsContext> missing = TlsContext::server(
      {.certificates = {Certificate::files("/nonexistent/a.crt", certs().key("server"))}});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("/nonexistent/a.crt"), std::string::npos)
      << missing.error().message();

  tern::Result<TlsContext> garbage =
      TlsContext::client({.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n"});
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error(), TlsErrc::config);

  tern::Result<TlsContext> none = TlsContext::server({});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), TlsErrc::config);

  tern::Result<TlsContext> no_ca = TlsContext::server(
      {.certificates = {Certificate::files(certs().crt("server"), certs().key("server"))},
       .client_auth = ClientAuth::require});
  ASSERT_FALSE(no_ca);
  EXPECT_NE(no_ca.error().message().find("CA bundle"), std::string::npos);

  // A failed reload leaves the context as it was.
  tern::Result<TlsContext> context = TlsContext::server(
      {.certificates = {Certificate::files(certs().crt("server"), certs().key("server"))}});
  ASSERT_TRUE(context);
  ASSERT_FALSE(context->reload({Certificate::files(certs().crt("server"), certs().key("alt"))}));
  EXPECT_EQ(context->generation(), 1u);
  ASSERT_TRUE(context->reload());
  EXPECT_EQ(context->generation(), 2u);
  tern::Result<bool> unchanged = context->reload_if_changed();  // the files are as they were
  ASSERT_TRUE(unchanged) << unchanged.error().message();
  EXPECT_FALSE(*unchanged);
  EXPECT_EQ(context->generation(), 2u);
}

TEST_P(TlsStreamTest, HandshakeHasItsOwnDeadline) {
  run_on(1, [this] {
    tern::Result<tern_test::Connected> pair = tern_test::connect_loopback();  // a silent peer
    ASSERT_TRUE(pair);
    tern::Result<TlsStream> client = TlsStream::connect(std::move(pair->client), client_context(),
                                                        "localhost", tern::deadline_after(100ms));
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error(), std::errc::timed_out) << client.error().message();
    EXPECT_NE(client.error().message().find("TLS handshake"), std::string::npos);
  });
}

TEST_P(TlsStreamTest, HandshakeIsCancelledByInterrupt) {
  run_on(1, [this] {
    tern::Result<tern_test::Connected> pair = tern_test::connect_loopback();  // a silent peer
    ASSERT_TRUE(pair);
    const std::error_code error = interrupted([&] {
      tern::Result<TlsStream> client =
          TlsStream::connect(std::move(pair->client), client_context(), "localhost", patience());
      return client ? std::error_code() : client.error();
    });
    EXPECT_EQ(error, std::errc::operation_canceled) << error.message();
  });
}

TEST_P(TlsStreamTest, RefusesAPlaintextClient) {
  run_on(1, [this] {
    tern::Result<tern_test::Connected> pair = tern_test::connect_loopback();  // a silent peer
    ASSERT_TRUE(pair);
    ASSERT_TRUE(pair->client.write_all(bytes_of("GET / HTTP/1.1\r\n\r\n"), patience()));
    tern::Result<TlsStream> server =
        TlsStream::accept(std::move(pair->server), server_context(), patience());
    ASSERT_FALSE(server);
    EXPECT_EQ(server.error(), TlsErrc::handshake) << server.error().message();
    EXPECT_NE(server.error().message().find("TLS handshake"), std::string::npos)
        << server.error().message();
  });
}

TEST_P(TlsStreamTest, EachConnectionIsCountedUnderThePathItTook) {
  // With the option, the kernel takes the records where it offers kernel TLS; otherwise (and
  // without the option) both ends stay in user space, silently.
  const bool kernel = kernel_tls() && kernel_offers_tls();
  run_on(1, [this, kernel] {
    const std::uint64_t kernel_before = counter("tls.kernel_tls");
    const std::uint64_t user_before = counter("tls.user_space_tls");
    Server server(server_context());
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    EXPECT_EQ(client->kernel_tls(), kernel);
    EXPECT_EQ(round_trip(*client, "over the kernel or not"), "over the kernel or not");
    // The client and the server's connection are both counted.
    EXPECT_EQ(counter("tls.kernel_tls") - kernel_before, kernel ? 2u : 0u);
    EXPECT_EQ(counter("tls.user_space_tls") - user_before, kernel ? 0u : 2u);
  });
}

TEST_P(TlsStreamTest, ReadIsCancelledByInterrupt) {
  run_on(1, [this] {
    Server server(server_context());
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    const std::error_code error = interrupted([&] {
      std::array<std::byte, 16> buffer;
      tern::Result<std::size_t> n = client->read(buffer, patience());
      return n ? std::error_code() : n.error();
    });
    EXPECT_EQ(error, std::errc::operation_canceled) << error.message();
  });
}

TEST_P(TlsStreamTest, CloseWithoutCloseNotifyIsTruncation) {
  run_on(1, [this] {
    Server server(server_context(), [](TlsStream& stream) {
      (void)stream.write_all(bytes_of("bye"), patience());
      stream.close();  // no close_notify
    });
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    std::array<std::byte, 3> bye;
    ASSERT_TRUE(client->read_exact(bye, patience()));
    EXPECT_EQ(text_of(bye), "bye");
    std::array<std::byte, 16> buffer;
    tern::Result<std::size_t> n = client->read(buffer, patience());
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), TlsErrc::truncated) << n.error().message();
    EXPECT_NE(n.error().message().find("without close_notify"), std::string::npos);
  });
}

// The same framing code over a plain and an encrypted stream.
template <tern::tls::ByteStream S>
void exchange_frames(S& client, S& server) {
  const tern::net::FrameFormat format;
  for (const std::string& body : std::vector<std::string>{"", "one", std::string(70'000, 'z')}) {
    std::array<std::byte, 4> header;
    tern::net::store_big_endian(header.data(), 4, body.size());
    ASSERT_TRUE(tern::tls::write_frame(client, header, bytes_of(body), patience()));
    tern::net::Buffer buffer;
    tern::Result<std::optional<tern::net::Frame>> frame =
        tern::tls::read_frame(server, buffer, format, patience());
    ASSERT_TRUE(frame) << frame.error().message();
    ASSERT_TRUE(frame->has_value());
    EXPECT_EQ(text_of((*frame)->body), body);
  }
}

TEST_P(TlsStreamTest, FramingCodeRunsOverTcpAndTls) {
  static_assert(tern::tls::ByteStream<TcpStream>);
  static_assert(tern::tls::ByteStream<TlsStream>);
  run_on(1, [this] {
    tern::Result<tern_test::Connected> plain = tern_test::connect_loopback();
    ASSERT_TRUE(plain);
    exchange_frames(plain->client, plain->server);

    tern::Result<tern_test::Connected> pair = tern_test::connect_loopback();
    ASSERT_TRUE(pair);
    TlsContext server_ctx = server_context();
    std::optional<tern::Result<TlsStream>> accepted;
    tern::Fiber acceptor = tern::spawn(
        [&] { accepted = TlsStream::accept(std::move(pair->server), server_ctx, patience()); });
    tern::Result<TlsStream> client =
        TlsStream::connect(std::move(pair->client), client_context(), "localhost", patience());
    acceptor.join();
    ASSERT_TRUE(client) << client.error().message();
    ASSERT_TRUE(accepted.has_value() && *accepted) << accepted->error().message();
    exchange_frames(*client, **accepted);
  });
}

}  // namespace

// try_write never waits: once the socket stops taking bytes (the echo comes back unread), its
// records stay queued (unsent()) and leave, in order, before those of the next write_all, or
// with flush().
TEST_P(TlsStreamTest, TryWriteQueuesWhatTheSocketDoesNotTake) {
  run_on(1, [this] {
    Server server(server_context());
    tern::Result<TlsStream> client = connect(server, client_context());
    ASSERT_TRUE(client) << client.error().message();
    if (client->kernel_tls()) GTEST_SKIP() << "with kernel TLS try_write sends nothing";
    // The server finishes its side of the handshake first: the loop below never parks, and on
    // this one worker a slow one (TSan on a busy machine) outlasted the server's handshake
    // deadline.
    ASSERT_EQ(round_trip(*client, "ready"), "ready");
    Fnv64 sent_hash, received_hash;
    std::vector<std::byte> piece(4096);
    std::uint64_t state = 7;
    std::size_t sent = 0;
    // Nothing parks in this loop, so nothing reads the echo: the buffers fill up.
    while (client->unsent() == 0 && sent < (256u << 20)) {
      tern_test::fill_pattern(piece, state);
      sent_hash.update(piece);
      tern::Result<std::size_t> taken = client->try_write(piece);
      ASSERT_TRUE(taken) << taken.error().message();
      ASSERT_EQ(*taken, piece.size());
      sent += piece.size();
    }
    ASSERT_GT(client->unsent(), 0u) << "the socket took " << sent << " bytes without a stop";
    const std::size_t total = sent + 2 * piece.size();
    tern::Fiber reader = tern::spawn([&] {
      std::vector<std::byte> buffer(65536);
      while (received_hash.size() < total) {
        tern::Result<std::size_t> n = client->read(buffer, patience());
        ASSERT_TRUE(n) << n.error().message();
        ASSERT_GT(*n, 0u);
        received_hash.update(std::span(buffer).first(*n));
      }
    });
    // One more piece queued behind the unsent records, then a write that sends both first.
    tern_test::fill_pattern(piece, state);
    sent_hash.update(piece);
    ASSERT_TRUE(client->try_write(piece));
    tern_test::fill_pattern(piece, state);
    sent_hash.update(piece);
    ASSERT_TRUE(client->write_all(piece, patience()));
    ASSERT_TRUE(client->flush(patience()));
    EXPECT_EQ(client->unsent(), 0u);
    reader.join();
    EXPECT_EQ(received_hash.value(), sent_hash.value());
  });
}
