// tern::rpc over TLS, under the backend named by TERN_IO: unary calls through tls:// targets and
// ChannelOptions::tls, the client's verified identity in ServerContext (mutual TLS), refused
// clients and servers (no client certificate, wrong CA, wrong host, expired, self-signed) with
// OpenSSL's reason in the status, plaintext and TLS peers that do not match, and the bearer
// token interceptor. Certificates are made with the openssl command line (tests/tls).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/fiber.h"
#include "tern/rpc/auth.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"
#include "tern/tls/tls_stream.h"
#include "tls_fixtures.h"
#include "tls_test.tern.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::Server;
using tern::rpc::ServerContext;
using tern::rpc::ServerOptions;
using tern::rpc::Status;
using tern::rpc::StatusCode;
using tern::rpc_tls_test::EchoReply;
using tern::rpc_tls_test::EchoRequest;
using tern::rpc_tls_test::EchoServiceClient;
using tern::tls::Certificate;
using tern::tls::ClientAuth;
using tern::tls::PeerIdentity;
using tern_test::run_on;
using tern_test::wait_for_condition;
using tern_tls_test::certs;
using tern_tls_test::client_context;
using tern_tls_test::server_context;

// What the last call's handler saw of its peer.
struct LastPeer {
  std::optional<PeerIdentity> seen;
  bool plaintext = false;
};

// Echoes the text and keeps the identity the last call saw. Handlers run on the server's
// workers while the test reads from its own fiber: the reply reaches the test through a socket,
// which orders nothing for ThreadSanitizer, so a mutex guards what they share.
class IdentityService final : public tern::rpc_tls_test::EchoServiceBase {
 public:
  Status Echo(ServerContext& context, const EchoRequest& request, EchoReply& reply) override {
    const PeerIdentity* identity = context.peer_identity();
    {
      std::lock_guard lock(mutex_);
      last_.plaintext = identity == nullptr;
      if (identity != nullptr) last_.seen = *identity;
    }
    reply.set_text(request.text());
    return {};
  }
  LastPeer last() const {
    std::lock_guard lock(mutex_);
    return last_;
  }

 private:
  mutable std::mutex mutex_;
  LastPeer last_;
};

// A server of IdentityService on 127.0.0.1:0, stopped when this goes away. Worker fibers.
struct TestServer {
  explicit TestServer(ServerOptions options, std::vector<tern::rpc::Interceptor> interceptors = {})
      : server(std::move(options)) {
    EXPECT_TRUE(server.add_service(service));
    for (tern::rpc::Interceptor& interceptor : interceptors)
      server.add_interceptor(std::move(interceptor));
    tern::Result<Address> bound = server.start(Address::loopback(0));
    EXPECT_TRUE(bound) << bound.error().message();
    if (bound) address = *bound;
  }
  ~TestServer() { server.stop(tern::deadline_after(5s)); }
  std::string port() const { return std::to_string(address.port()); }

  IdentityService service;
  Server server;
  Address address;
};

ServerOptions tls_server(std::string certificate = "server", tern::tls::ServerConfig config = {}) {
  ServerOptions options;
  options.tls = server_context(certificate, std::move(config));
  return options;
}

ChannelOptions quick(tern::tls::TlsContext tls = {}) {
  ChannelOptions options;
  options.reconnect.initial_backoff = 20ms;
  options.reconnect.max_backoff = 100ms;
  options.reconnect.attempt_timeout = 5s;
  options.connections_per_endpoint = 1;
  // No keepalive pings: these tests are not about them, and under TSan on a busy machine a pong
  // queued behind 50 calls at once missed its 5 s (the fault tests cover pings).
  options.ping_interval = 0ms;
  options.tls = std::move(tls);
  return options;
}

// One Echo call of `text` on a fresh channel to `target`; its status, with the reply checked.
Status echo(const std::string& target, ChannelOptions options, const std::string& text,
            ClientContext context = {}) {
  tern::rpc::Result<Channel> channel = Channel::open(target, std::move(options));
  if (!channel) return channel.error();
  EchoServiceClient client(*channel);
  EchoRequest request;
  request.set_text(text);
  EchoReply reply;
  context.set_timeout(10s);
  Status status = client.Echo(context, request, reply);
  if (status.ok()) {
    EXPECT_EQ(reply.text(), text);
  }
  return status;
}

class RpcTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs().ok); }
};

TEST_F(RpcTlsTest, UnaryCallsOverTls) {
  run_on(2, [] {
    TestServer server(tls_server());
    // A tls:// target verified against the certificate's IP name, and a plain target with
    // ChannelOptions::tls verified against the name given in tls_server_name.
    ChannelOptions by_name = quick(client_context());
    by_name.tls_server_name = "localhost";
    for (auto [target, options] :
         {std::pair{"tls://127.0.0.1:" + server.port(), quick(client_context())},
          std::pair{"127.0.0.1:" + server.port(), by_name}}) {
      SCOPED_TRACE(target);
      tern::rpc::Result<Channel> channel = Channel::open(target, options);
      ASSERT_TRUE(channel) << channel.error().to_string();
      EchoServiceClient client(*channel);
      for (int i = 0; i < 200; ++i) {
        EchoRequest request;
        request.set_text("call " + std::to_string(i) +
                         std::string(static_cast<std::size_t>(i) * 37, 'x'));
        EchoReply reply;
        ClientContext context;
        context.set_timeout(10s);
        const Status status = client.Echo(context, request, reply);
        ASSERT_TRUE(status.ok()) << status.to_string();
        EXPECT_EQ(reply.text(), request.text());
      }
      // Calls at once share the connection (replies come back in any order).
      std::vector<tern::rpc::Future<EchoReply>> calls;
      for (int i = 0; i < 50; ++i) {
        EchoRequest request;
        request.set_text("async " + std::to_string(i));
        calls.push_back(client.EchoAsync(ClientContext(), request));
      }
      for (int i = 0; i < 50; ++i) {
        auto reply = calls[static_cast<std::size_t>(i)].get();
        ASSERT_TRUE(reply) << reply.error().to_string();
        EXPECT_EQ(reply->text(), "async " + std::to_string(i));
      }
    }
    const LastPeer last = server.service.last();
    ASSERT_TRUE(last.seen.has_value());
    EXPECT_FALSE(last.plaintext);
    EXPECT_FALSE(last.seen->has_certificate);  // no client certificate was asked for
    EXPECT_EQ(server.server.stats().tls_handshakes, 2u);
    EXPECT_EQ(server.server.stats().calls, 500u);
  });
}

// Replies of one record or less leave from the handler's fiber (encrypted there, the rest
// queued for the writer when the socket is full), larger ones through the writer fiber: mixed
// at once on one connection, every reply comes back whole.
TEST_F(RpcTlsTest, SmallAndLargeRepliesShareATlsConnection) {
  run_on(1, [] {
    TestServer server(tls_server());
    tern::rpc::Result<Channel> channel =
        Channel::open("tls://127.0.0.1:" + server.port(), quick(client_context()));
    ASSERT_TRUE(channel) << channel.error().to_string();
    EchoServiceClient client(*channel);
    const std::size_t sizes[] = {10, 16 * 1024 - 64, 16 * 1024 + 1, 300'000};
    for (int round = 0; round < 3; ++round) {
      std::vector<std::pair<std::string, tern::rpc::Future<EchoReply>>> calls;
      for (int i = 0; i < 40; ++i) {
        EchoRequest request;
        request.set_text(std::string(sizes[static_cast<std::size_t>(i) % std::size(sizes)],
                                     static_cast<char>('a' + i % 26)));
        ClientContext context;
        context.set_timeout(20s);
        calls.emplace_back(request.text(), client.EchoAsync(std::move(context), request));
      }
      for (auto& [text, call] : calls) {
        auto reply = call.get();
        ASSERT_TRUE(reply) << reply.error().to_string();
        EXPECT_EQ(reply->text(), text);
      }
    }
    EXPECT_EQ(server.server.stats().calls, 120u);
  });
}

TEST_F(RpcTlsTest, ClientIdentityIsVisibleInTheHandler) {
  run_on(1, [] {
    TestServer server(
        tls_server("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::require}));
    ChannelOptions options = quick(client_context(
        {.certificate = {Certificate::files(certs().crt("client"), certs().key("client"))}}));
    const Status status = echo("tls://127.0.0.1:" + server.port(), options, "it is me");
    ASSERT_TRUE(status.ok()) << status.to_string();
    const LastPeer last = server.service.last();
    ASSERT_TRUE(last.seen.has_value());
    EXPECT_TRUE(last.seen->has_certificate);
    EXPECT_TRUE(last.seen->verified);
    EXPECT_EQ(last.seen->subject, "CN=client,O=tern");
    EXPECT_EQ(last.seen->names, std::vector<std::string>{"client.tern.test"});

    // A plaintext server shows no identity.
    TestServer plain({});
    ASSERT_TRUE(echo("127.0.0.1:" + plain.port(), quick(), "plain").ok());
    EXPECT_TRUE(plain.service.last().plaintext);
  });
}

TEST_F(RpcTlsTest, ClientWithoutCertificateIsRefusedWhenOneIsRequired) {
  run_on(1, [] {
    TestServer server(
        tls_server("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::require}));
    const Status status = echo("tls://127.0.0.1:" + server.port(), quick(client_context()), "x");
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::unavailable) << status.to_string();
    // In TLS 1.3 the client learns it from the server's alert once its handshake is done.
    EXPECT_NE(status.message().find("certificate required"), std::string::npos)
        << status.to_string();
    EXPECT_TRUE(
        wait_for_condition([&] { return server.server.stats().tls_rejected_certificate >= 1; }));
    EXPECT_EQ(server.server.stats().calls, 0u);
  });
}

TEST_F(RpcTlsTest, ChannelRefusesBadServerCertificates) {
  struct Case {
    std::string certificate;  // the server's
    std::string trusted_ca;   // the client's CA bundle
    std::string reason;       // OpenSSL's, in the status
  };
  const std::vector<Case> cases = {
      {"server", certs().crt("otherca"), "unable to get local issuer certificate"},
      {"wronghost", certs().ca(), "hostname mismatch"},
      {"expired", certs().ca(), "certificate has expired"},
      {"selfsigned", certs().ca(), "self-signed certificate"},
  };
  run_on(1, [&] {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.certificate);
      TestServer server(tls_server(c.certificate));
      ChannelOptions options = quick(client_context({.ca_file = c.trusted_ca}));
      options.tls_server_name = "localhost";
      const Status status = echo("127.0.0.1:" + server.port(), options, "x");
      ASSERT_FALSE(status.ok());
      EXPECT_EQ(status.code(), StatusCode::unavailable) << status.to_string();
      EXPECT_NE(status.message().find("TLS handshake with 127.0.0.1:" + server.port()),
                std::string::npos)
          << status.to_string();
      EXPECT_NE(status.message().find(c.reason), std::string::npos) << status.to_string();
      EXPECT_EQ(server.server.stats().calls, 0u);
    }
  });
}

TEST_F(RpcTlsTest, PlaintextAndTlsPeersThatDoNotMatchFailCleanly) {
  run_on(2, [] {
    TestServer secure(tls_server());
    TestServer plain({});
    // A plaintext client of the TLS server: refused and counted; its call fails.
    const Status refused = echo("127.0.0.1:" + secure.port(), quick(), "plain to tls");
    EXPECT_EQ(refused.code(), StatusCode::unavailable) << refused.to_string();
    EXPECT_TRUE(
        wait_for_condition([&] { return secure.server.stats().tls_rejected_not_tls >= 1; }));
    // A TLS client of the plaintext server: its handshake fails with OpenSSL's reason.
    const Status mismatch = echo("tls://127.0.0.1:" + plain.port(), quick(client_context()), "x");
    EXPECT_EQ(mismatch.code(), StatusCode::unavailable) << mismatch.to_string();
    EXPECT_NE(mismatch.message().find("TLS handshake"), std::string::npos) << mismatch.to_string();
    // Both servers still serve clients that speak their language.
    EXPECT_TRUE(echo("tls://127.0.0.1:" + secure.port(), quick(client_context()), "tls").ok());
    EXPECT_TRUE(echo("127.0.0.1:" + plain.port(), quick(), "plain").ok());
    EXPECT_EQ(secure.server.stats().calls, 1u);
    EXPECT_EQ(plain.server.stats().calls, 1u);
  });
}

TEST_F(RpcTlsTest, BearerTokenInterceptorChecksEveryCall) {
  run_on(1, [] {
    TestServer server(tls_server(), {tern::rpc::bearer_token_interceptor({"s3cret", "other"})});
    const std::string target = "tls://127.0.0.1:" + server.port();
    ChannelOptions good = quick(client_context());
    good.bearer_token = "s3cret";
    EXPECT_TRUE(echo(target, good, "with the token").ok());
    ChannelOptions second = good;
    second.bearer_token = "other";
    EXPECT_TRUE(echo(target, second, "with the other token").ok());

    struct Case {
      std::string token;          // ChannelOptions::bearer_token
      std::string authorization;  // a ClientContext's own metadata, overriding it
      std::string reason;
    };
    const std::vector<Case> refused = {
        {"", "", "no \"authorization\" metadata"},
        {"s3cre", "", "not accepted"},
        {"s3cret!", "", "not accepted"},
        {"s3cret", "Basic czNjcmV0", "not of the form \"Bearer <token>\""},
        {"s3cret", "Bearer ", "not of the form"},
        {"s3cret", "Bearer wrong", "not accepted"},
    };
    for (const Case& c : refused) {
      SCOPED_TRACE(c.token + " / " + c.authorization);
      ChannelOptions options = quick(client_context());
      options.bearer_token = c.token;
      ClientContext context;
      if (!c.authorization.empty()) context.add_metadata("authorization", c.authorization);
      const Status status = echo(target, options, "x", context);
      EXPECT_EQ(status.code(), StatusCode::unauthenticated) << status.to_string();
      EXPECT_NE(status.message().find(c.reason), std::string::npos) << status.to_string();
    }
    EXPECT_EQ(server.server.stats().calls, 2u + refused.size());
    EXPECT_TRUE(server.service.last().seen.has_value());
  });
}

TEST_F(RpcTlsTest, TokenCallbackSeesTheCallersIdentity) {
  run_on(1, [] {
    // Tokens bound to a client certificate: "client-token" only from client.tern.test.
    auto accept = [](std::string_view token, const ServerContext& context) {
      const PeerIdentity* identity = context.peer_identity();
      return identity != nullptr && identity->verified && token == "client-token" &&
             identity->names == std::vector<std::string>{"client.tern.test"};
    };
    TestServer server(
        tls_server("server", {.ca_file = certs().ca(), .client_auth = ClientAuth::request}),
        {tern::rpc::bearer_token_interceptor(accept)});
    const std::string target = "tls://127.0.0.1:" + server.port();
    ChannelOptions with_certificate = quick(client_context(
        {.certificate = {Certificate::files(certs().crt("client"), certs().key("client"))}}));
    with_certificate.bearer_token = "client-token";
    EXPECT_TRUE(echo(target, with_certificate, "bound").ok());
    ChannelOptions anonymous = quick(client_context());
    anonymous.bearer_token = "client-token";
    EXPECT_EQ(echo(target, anonymous, "stolen").code(), StatusCode::unauthenticated);
  });
}

TEST(ConstantTimeCompare, ComparesBytesAndLengths) {
  EXPECT_TRUE(tern::rpc::equal_in_constant_time("", ""));
  EXPECT_TRUE(tern::rpc::equal_in_constant_time("token", "token"));
  EXPECT_FALSE(tern::rpc::equal_in_constant_time("token", "tokem"));
  EXPECT_FALSE(tern::rpc::equal_in_constant_time("token", "token2"));
  EXPECT_FALSE(tern::rpc::equal_in_constant_time("token", ""));
  EXPECT_FALSE(tern::rpc::equal_in_constant_time(std::string_view("a\0b", 3), "a"));
}

}  // namespace
