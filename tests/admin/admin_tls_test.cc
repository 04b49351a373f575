// The admin endpoint over TLS and with a bearer token, under the backend TERN_IO names: Python's
// http.client and ssl modules scrape it over real loopback connections (with the token: 200;
// without or with another one: 401 and WWW-Authenticate, counted), plaintext sent to its TLS
// port is refused and counted while it keeps serving, mutual TLS refuses a client without a
// certificate, the token file is read at start and bad ones are refused, and the warning for an
// endpoint beyond loopback says what protects it. Certificates come from tests/tls.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/net_test_util.h"
#include "reliability/reliability_util.h"
#include "tern/admin/admin_server.h"
#include "tern/admin/admin_tls.h"
#include "tern/io/offload.h"
#include "tern/prof/metrics.h"
#include "tern/tls/tls_context.h"
#include "tls/tls_fixtures.h"
#include "tls/tls_test_util.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using tern::admin::AdminOptions;
using tern::admin::AdminServer;
using tern::net::Address;
using tern::net::TcpStream;
using tern::tls::ClientAuth;
using tern_test::bytes_of;
using tern_test::patience;
using tern_test::run_on;
using tern_tls_test::certs;
using tern_tls_test::Child;
using tern_tls_test::server_context;

constexpr std::string_view kToken = "Zm9vYmFy.admin-token_42";

double counter_value(const std::string& name, const tern::prof::Labels& labels = {}) {
  return static_cast<double>(
      tern::prof::MetricsRegistry::global().counter(name, "", labels).value());
}

double unauthorized_count() {
  return counter_value("tern_admin_requests_total", {{"code", "401"}});
}
double handshake_failures() { return counter_value("tern_admin_handshake_failures_total"); }

// Runs tests/admin/admin_https_client.py against 127.0.0.1:port with `extra` arguments (on the
// offload pool: it blocks); its JSON line, or {"error"} with its output if it printed none.
json python_get(const Address& server, const std::string& path,
                const std::vector<std::string>& extra = {}) {
  return tern::io::offload([&] {
    std::vector<std::string> argv = {TERN_PYTHON, TERN_ADMIN_CLIENT_PY,
                                     std::to_string(server.port()), certs().ca(), path};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Child client(argv);
    const int status = client.finish(30s);
    json reply = json::parse(client.output(), nullptr, /*allow_exceptions=*/false);
    if (status != 0 || reply.is_discarded())
      return json{{"error", "exit " + std::to_string(status) + ": " + client.output()}};
    return reply;
  });
}

// Sends `bytes` on a raw TCP connection and reads until the server closes it; what came back.
std::string raw_exchange(const Address& server, std::string_view bytes) {
  tern::Result<TcpStream> stream = TcpStream::connect(server, patience());
  if (!stream) return "connect: " + stream.error().message();
  if (!stream->write_all(bytes_of(bytes), patience())) return "write failed";
  std::string all;
  std::array<std::byte, 4096> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream->read(buf, patience());
    if (!n) return n.error() == std::errc::timed_out ? "timed out" : all;
    if (*n == 0) return all;
    all += tern_test::text_of(std::span(buf).first(*n));
  }
}

class AdminTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs().ok); }
};

TEST_F(AdminTlsTest, PythonScrapesWithTheTokenAndIsRefusedWithout) {
  run_on(1, [] {
    AdminOptions options;
    options.transport = tern::admin::tls_transport(server_context());
    options.token = kToken;
    AdminServer server(options);
    tern::Result<Address> address = server.start(Address::loopback(0));
    ASSERT_TRUE(address) << address.error().message();
    const std::string bearer(kToken);
    const double unauthorized_before = unauthorized_count();
    const double refused_before = handshake_failures();

    const json metrics = python_get(*address, "/metrics", {"--token", bearer});
    EXPECT_EQ(metrics.value("status", 0), 200) << metrics.dump();
    EXPECT_NE(metrics.value("body", "").find("# TYPE tern_admin_requests_total counter"),
              std::string::npos)
        << metrics.dump();

    const json anonymous = python_get(*address, "/metrics");
    EXPECT_EQ(anonymous.value("status", 0), 401) << anonymous.dump();
    EXPECT_EQ(anonymous.value("www_authenticate", ""), "Bearer realm=\"tern-admin\"");
    EXPECT_EQ(anonymous.value("body", "").find("# TYPE"), std::string::npos);

    const json wrong = python_get(*address, "/status", {"--token", bearer + "x"});
    EXPECT_EQ(wrong.value("status", 0), 401) << wrong.dump();
    EXPECT_NE(wrong.value("www_authenticate", "").find("error=\"invalid_token\""),
              std::string::npos)
        << wrong.dump();
    EXPECT_EQ(unauthorized_count(), unauthorized_before + 2);

    // Plain HTTP to the TLS port: closed without an HTTP answer, logged and counted.
    const std::string plain = raw_exchange(*address, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(plain.find("HTTP/1.1"), std::string::npos) << plain;
    EXPECT_NE(plain, "timed out");
    EXPECT_TRUE(
        tern_test::wait_for_condition([&] { return handshake_failures() == refused_before + 1; }));

    // And it keeps serving.
    const json status = python_get(*address, "/status", {"--token", bearer});
    EXPECT_EQ(status.value("status", 0), 200) << status.dump();
    EXPECT_TRUE(json::parse(status.value("body", ""), nullptr, false).is_object()) << status.dump();
    server.stop();
  });
}

TEST_F(AdminTlsTest, MutualTlsRefusesAClientWithoutACertificate) {
  run_on(1, [] {
    AdminOptions options;
    options.transport = tern::admin::tls_transport(
        server_context("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::require}));
    AdminServer server(options);
    tern::Result<Address> address = server.start(Address::loopback(0));
    ASSERT_TRUE(address) << address.error().message();
    const double refused_before = handshake_failures();

    const json with_certificate = python_get(
        *address, "/", {"--cert", certs().crt("client"), "--key", certs().key("client")});
    EXPECT_EQ(with_certificate.value("status", 0), 200) << with_certificate.dump();

    const json without = python_get(*address, "/");
    EXPECT_TRUE(without.contains("error")) << without.dump();
    const json stranger = python_get(
        *address, "/",
        {"--cert", certs().crt("otherca_client"), "--key", certs().key("otherca_client")});
    EXPECT_TRUE(stranger.contains("error")) << stranger.dump();
    EXPECT_TRUE(
        tern_test::wait_for_condition([&] { return handshake_failures() == refused_before + 2; }));
    server.stop();
  });
}

TEST_F(AdminTlsTest, TokenFileIsReadAtStartAndBadTokensAreRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(certs().dir) / "admin_token";
  fs::create_directories(dir);
  std::ofstream(dir / "token") << "  " << kToken << "\n";
  std::ofstream(dir / "empty") << "\n\n";
  std::ofstream(dir / "spaced") << "two words\n";
  run_on(1, [&] {
    AdminServer server({.token_file = dir / "token"});
    tern::Result<Address> address = server.start(Address::loopback(0));
    ASSERT_TRUE(address) << address.error().message();
    const std::string anonymous = raw_exchange(*address, "GET /metrics HTTP/1.1\r\n\r\n");
    EXPECT_TRUE(anonymous.starts_with("HTTP/1.1 401 Unauthorized\r\n")) << anonymous;
    EXPECT_NE(anonymous.find("\r\nWWW-Authenticate: Bearer realm=\"tern-admin\"\r\n"),
              std::string::npos);
    const std::string authorized =
        raw_exchange(*address, "GET /metrics HTTP/1.1\r\nauthorization:  bearer " +
                                   std::string(kToken) + " \r\n\r\n");
    EXPECT_TRUE(authorized.starts_with("HTTP/1.1 200 OK\r\n")) << authorized.substr(0, 200);
    const std::string head = raw_exchange(*address, "HEAD /metrics HTTP/1.1\r\n\r\n");
    EXPECT_TRUE(head.starts_with("HTTP/1.1 401 Unauthorized\r\n")) << head;
    EXPECT_TRUE(head.ends_with("\r\n\r\n")) << head;  // no body
    const std::string other_scheme = raw_exchange(
        *address, "GET / HTTP/1.1\r\nAuthorization: Basic " + std::string(kToken) + "\r\n\r\n");
    EXPECT_TRUE(other_scheme.starts_with("HTTP/1.1 401 ")) << other_scheme;
    server.stop();

    struct Bad {
      AdminOptions options;
      std::string reason;
    };
    const std::vector<Bad> bad = {
        {{.token_file = dir / "missing"},
         "admin token file " + (dir / "missing").string() +
             ": cannot open it: No such file or directory"},
        {{.token_file = dir / "empty"}, "is empty"},
        {{.token_file = dir / "spaced"}, "no blanks"},
        {{.token = "caf\xc3\xa9"}, "visible ASCII"},
    };
    for (const Bad& b : bad) {
      AdminServer refused(b.options);
      tern::Result<Address> started = refused.start(Address::loopback(0));
      ASSERT_FALSE(started) << b.reason;
      EXPECT_NE(started.error().message().find(b.reason), std::string::npos)
          << started.error().message();
      EXPECT_FALSE(refused.running());
    }
  });
}

TEST_F(AdminTlsTest, WarningBeyondLoopbackSaysWhatProtectsTheEndpoint) {
  struct Case {
    bool tls;
    std::string token;
    std::string says;
  };
  const std::vector<Case> cases = {
      {false, "", "with neither TLS nor a token"},
      {false, "t0ken", "with a token but no TLS"},
      {true, "", "over TLS but without a token"},
      {true, "t0ken", "over TLS and with a token"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    tern_test::LogCapture log;
    run_on(1, [&] {
      AdminOptions options;
      if (c.tls) options.transport = tern::admin::tls_transport(server_context());
      options.token = c.token;
      AdminServer server(options);
      tern::Result<Address> any = Address::parse(":0");
      ASSERT_TRUE(any);
      tern::Result<Address> bound = server.start(*any);
      ASSERT_TRUE(bound) << bound.error().message();
      server.stop();
    });
    EXPECT_TRUE(log.has_line({" WARN ", "admin endpoint on 0.0.0.0:", c.tls ? "(https)" : "(http)",
                              "reachable from other hosts", c.says}))
        << log.text();
  }
}

}  // namespace
