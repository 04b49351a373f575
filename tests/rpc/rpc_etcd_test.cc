// Service discovery on a real etcd (docs/rpc.md, naming), under the backend named by TERN_IO:
// servers register themselves, a channel on etcd:// follows them as they join, stop and lose
// their lease, keeps its endpoints while etcd is down, and survives an etcd that answers garbage;
// dns:// targets are resolved again through an injected resolver. Every test starts its own etcd.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd_fixture.h"
#include "naming_test.tern.h"
#include "rpc/etcd_client.h"
#include "rpc/etcd_registration.h"
#include "rpc/naming.h"
#include "rpc_fixture.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/offload.h"
#include "tern/net/tcp_listener.h"
#include "tern/prof/status_sections.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"

namespace {

using namespace std::chrono_literals;
using tern::naming_test::NamingTestClient;
using tern::net::Address;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::Server;
using tern::rpc::ServerContext;
using tern::rpc::ServerOptions;
using tern::rpc::Status;
using tern::rpc::StatusCode;
using EchoReply = tern::naming_test::Reply;
using EchoRequest = tern::naming_test::Request;
using tern_test::EtcdServer;
namespace detail = tern::rpc::detail;

constexpr std::string_view kService = "tern.naming_test.NamingTest";
constexpr auto kPatience = 15s;

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = kPatience) {
  return tern_test::eventually(pred, limit);
}

class NamedService final : public tern::naming_test::NamingTestBase {
 public:
  explicit NamedService(std::string name) : name_(std::move(name)) {}
  Status Echo(ServerContext&, const EchoRequest&, EchoReply& reply) override {
    ++echoes;
    reply.set_server(name_);
    return {};
  }
  Status Sleep(ServerContext& context, const EchoRequest& request, EchoReply& reply) override {
    ++sleeps;
    ++sleeping;
    const tern::Deadline until =
        tern::deadline_after(std::chrono::milliseconds(request.delay_ms()));
    while (tern::Clock::now() < until && !context.cancelled()) {
      (void)tern::this_fiber::sleep_for(1ms);
    }
    --sleeping;
    reply.set_server(name_);
    return {};
  }
  int echoes = 0;
  int sleeps = 0;    // Sleep calls started
  int sleeping = 0;  // Sleep calls running now

 private:
  std::string name_;
};

// A NamedService on 127.0.0.1:0, registered in etcd unless `etcd` is empty.
struct Registered {
  Registered(std::string name, const std::string& etcd, std::string zone = "")
      : service(std::move(name)), server(options(etcd, std::move(zone))) {
    const Address bound = tern_test::start_on_loopback(server, service);
    if (server.running()) address = bound.to_string();
  }
  ~Registered() { stop(); }
  void stop() {
    if (server.running()) server.stop(tern::deadline_after(5s));
  }
  static ServerOptions options(const std::string& etcd, std::string zone) {
    ServerOptions options;
    options.registry.etcd = etcd;
    options.registry.ttl = 2s;
    options.registry.timeout = 1s;
    options.registry.zone = std::move(zone);
    options.registry.weight = 3;
    options.registry.metadata = {{"version", "1.2"}};
    return options;
  }

  NamedService service;
  Server server;
  std::string address;
};

ChannelOptions quick_options() {
  ChannelOptions options = tern_test::quick_options();
  options.etcd_timeout = 1s;
  options.etcd_max_backoff = 200ms;
  return options;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Calls Echo in a loop from its own fiber until stopped, counting what fails (and why); while
// paused it makes no new calls.
class Load {
 public:
  explicit Load(Channel& channel) : client_(channel) {
    fiber_ = tern::spawn([this] {
      while (!stop_) {
        if (paused_) {
          (void)tern::this_fiber::sleep_for(1ms);
          continue;
        }
        ClientContext context;
        context.set_timeout(2s);
        EchoRequest request;
        EchoReply reply;
        const Status status = client_.Echo(context, request, reply);
        ++calls_;
        if (!status.ok()) {
          ++failed_;
          last_failure_ = status.to_string();
        }
        (void)tern::this_fiber::sleep_for(1ms);
      }
    });
  }
  ~Load() { stop(); }
  void stop() {
    stop_ = true;
    if (fiber_.joinable()) fiber_.join();
  }
  void set_paused(bool paused) { paused_ = paused; }
  int calls() const { return calls_; }
  int failed() const { return failed_; }
  const std::string& last_failure() const { return last_failure_; }

 private:
  NamingTestClient client_;
  tern::Fiber fiber_;
  bool stop_ = false;
  bool paused_ = false;
  int calls_ = 0;
  int failed_ = 0;
  std::string last_failure_;
};

// Slow calls started over `channel` one at a time until one runs on `target`: each is waited
// for until it reached one of `services` (a condition with a deadline, not a sleep, so a loaded
// machine only makes it slower). `load` makes no calls meanwhile: its calls interleaved with
// these in the round robin could steer every slow call away from `target` (one slow call and two
// of its calls per turn, over three servers, always land the slow one on the same server).
// wait() says whether they all succeeded; the destructor waits for them too, so a test that
// returns early (a failed ASSERT) still joins every fiber.
class SlowCalls {
 public:
  SlowCalls(Channel& channel, Load& load, const NamedService& target,
            const std::vector<const NamedService*>& services)
      : client_(channel) {
    load.set_paused(true);
    const auto started = [&] {
      int sleeps = 0;
      for (const NamedService* service : services) sleeps += service->sleeps;
      return sleeps;
    };
    const int before = started();
    const int target_before = target.sleeps;
    for (int i = 0; i < 16 && target.sleeps == target_before; ++i) {
      fibers_.push_back(tern::spawn([this] {
        ClientContext context;
        context.set_timeout(5s);
        EchoRequest request;
        request.set_delay_ms(1000);
        EchoReply reply;
        const Status status = client_.Sleep(context, request, reply);
        if (!status.ok()) failure_ = status.to_string();
      }));
      const int launched = i + 1;
      if (!eventually([&] { return started() - before >= launched; })) {
        failure_ = "a slow call reached no server";
        break;
      }
    }
    load.set_paused(false);
    if (failure_.empty() && target.sleeps == target_before) {
      failure_ = "16 slow calls ran, none on the target server";
    }
  }
  // Why the slow calls did not all succeed, so far (empty if they did).
  const std::string& failure() const { return failure_; }
  ~SlowCalls() { (void)wait(); }
  std::string wait() {
    for (tern::Fiber& fiber : fibers_) {
      if (fiber.joinable()) fiber.join();
    }
    return failure_;
  }

 private:
  NamingTestClient client_;
  std::vector<tern::Fiber> fibers_;
  std::string failure_;
};

std::string etcd_target(const EtcdServer& etcd) {
  return "etcd://" + etcd.endpoint() + "/" + std::string(kService);
}

#define REQUIRE_ETCD(etcd) \
  ASSERT_TRUE((etcd).started()) << "etcd did not start:\n" << (etcd).log_tail()

TEST(EtcdNaming, ServersJoinAndLeaveWithoutFailedCalls) {
  EtcdServer etcd;
  REQUIRE_ETCD(etcd);
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Registered a("a", etcd.endpoint(), "zone-1");
    Registered b("b", etcd.endpoint(), "zone-2");
    tern::rpc::Result<Channel> opened = Channel::open(etcd_target(etcd), quick_options());
    ASSERT_TRUE(opened) << opened.error().to_string();
    Channel& channel = *opened;
    ASSERT_TRUE(eventually([&] { return channel.endpoints().size() == 2; }))
        << channel.endpoints().size();
    Load load(channel);
    ASSERT_TRUE(eventually([&] { return a.service.echoes > 0 && b.service.echoes > 0; }));

    // What the servers registered reaches the channel's endpoints (and its load balancer).
    for (const tern::rpc::EndpointStatus& endpoint : channel.endpoint_status()) {
      EXPECT_EQ(endpoint.zone, endpoint.name == a.address ? "zone-1" : "zone-2");
      EXPECT_EQ(endpoint.weight, 3u);
    }

    // The registration is listed in /status.
    bool listed = false;
    for (const auto& [name, value] : tern::prof::collect_status_sections()) {
      if (name != "rpc_registrations") continue;
      listed = value.find(a.address) != std::string::npos &&
               value.find("\"state\":\"registered\"") != std::string::npos;
    }
    EXPECT_TRUE(listed);

    // A third server joins and gets traffic.
    Registered c("c", etcd.endpoint());
    ASSERT_TRUE(eventually([&] { return has(channel.endpoints(), c.address); }));
    ASSERT_TRUE(eventually([&] { return c.service.echoes > 0; }));

    // Calls in flight on `a` when it stops finish; afterwards `a` is out of the set.
    SlowCalls slow(channel, load, a.service, {&a.service, &b.service, &c.service});
    ASSERT_GT(a.service.sleeping, 0) << slow.failure();
    a.stop();
    EXPECT_EQ(slow.wait(), "");
    EXPECT_TRUE(eventually([&] { return !has(channel.endpoints(), a.address); }));
    const int served_by_a = a.service.echoes;
    const int calls_before = load.calls();
    ASSERT_TRUE(eventually([&] { return load.calls() > calls_before + 50; }));
    EXPECT_EQ(a.service.echoes, served_by_a);
    load.stop();
    EXPECT_EQ(load.failed(), 0) << load.last_failure();
    EXPECT_EQ(channel.stats().endpoints, 2u);
    channel.close();
  });
}

TEST(EtcdNaming, KeepsItsEndpointsWhileEtcdIsDown) {
  EtcdServer etcd;
  REQUIRE_ETCD(etcd);
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Registered a("a", etcd.endpoint());
    tern::rpc::Result<Channel> opened = Channel::open(etcd_target(etcd), quick_options());
    ASSERT_TRUE(opened) << opened.error().to_string();
    Channel& channel = *opened;
    ASSERT_TRUE(eventually([&] { return channel.endpoints().size() == 1; }));
    Load load(channel);

    etcd.kill();
    // Calls go on to the endpoint it knows.
    const int calls_before = load.calls();
    ASSERT_TRUE(eventually([&] { return load.calls() > calls_before + 100; }));
    EXPECT_EQ(channel.endpoints(), std::vector<std::string>{a.address});

    // A server that starts while etcd is down is registered once it is back, and seen.
    Registered b("b", etcd.endpoint());
    const bool back = tern::io::offload([&] { return etcd.restart(); });
    ASSERT_TRUE(back) << etcd.log_tail();
    ASSERT_TRUE(eventually([&] { return has(channel.endpoints(), b.address); }))
        << channel.endpoints().size();
    ASSERT_TRUE(eventually([&] { return b.service.echoes > 0; }));
    EXPECT_TRUE(has(channel.endpoints(), a.address));
    load.stop();
    EXPECT_EQ(load.failed(), 0) << load.last_failure();
    channel.close();
  });
}

TEST(EtcdNaming, ExpiredOrRevokedLeasesDropEndpoints) {
  EtcdServer etcd;
  REQUIRE_ETCD(etcd);
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Registered a("a", etcd.endpoint());
    // `ghost` is registered by hand under a lease nobody renews: a server that hung.
    Registered ghost("ghost", "");
    detail::EtcdClient client({etcd.endpoint()}, 2s);
    tern::rpc::Result<std::int64_t> lease = client.lease_grant(2s);
    ASSERT_TRUE(lease) << lease.error().to_string();
    tern::rpc::RegistryOptions ghost_options;
    ASSERT_TRUE(client.put(detail::registration_key(ghost_options.prefix, kService, ghost.address),
                           detail::registration_value(ghost_options, ghost.address), *lease));

    tern::rpc::Result<Channel> opened = Channel::open(etcd_target(etcd), quick_options());
    ASSERT_TRUE(opened) << opened.error().to_string();
    Channel& channel = *opened;
    ASSERT_TRUE(eventually([&] { return channel.endpoints().size() == 2; }));
    ASSERT_TRUE(eventually([&] { return !has(channel.endpoints(), ghost.address); }));
    EXPECT_TRUE(has(channel.endpoints(), a.address));

    // Its registration cut (the lease revoked behind its back), `a` vanishes, then registers
    // again at its next keep-alive and comes back.
    tern::rpc::Result<detail::EtcdRange> keys = client.range_prefix("/tern/services/");
    ASSERT_TRUE(keys) << keys.error().to_string();
    ASSERT_EQ(keys->kvs.size(), 1u);
    ASSERT_NE(keys->kvs[0].lease, 0);
    ASSERT_TRUE(client.lease_revoke(keys->kvs[0].lease, tern::deadline_after(2s)));
    ASSERT_TRUE(eventually([&] { return channel.endpoints().empty(); }));
    ASSERT_TRUE(eventually([&] { return has(channel.endpoints(), a.address); }));
    NamingTestClient echo(channel);
    ClientContext context;
    context.set_timeout(5s);
    context.set_wait_for_ready(true);
    EchoReply reply;
    EXPECT_TRUE(echo.Echo(context, EchoRequest(), reply).ok());
    EXPECT_EQ(reply.server(), "a");
    channel.close();
  });
}

// A stand-in for etcd that answers every request with `answer` (raw HTTP), once per connection.
class FakeEtcd {
 public:
  explicit FakeEtcd(std::vector<std::string> answers) : answers_(std::move(answers)) {
    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(Address::loopback(0));
    EXPECT_TRUE(listener);
    listener_ = std::move(*listener);
    endpoint_ = listener_.local_address()->to_string();
    fiber_ = tern::spawn([this] {
      for (std::size_t i = 0; !stop_;) {
        // A bounded accept: an interrupt the fiber took in a read or write is not seen again.
        tern::Result<tern::net::TcpStream> peer = listener_.accept(tern::deadline_after(50ms));
        if (!peer) continue;
        std::byte request[8192];
        (void)peer->read(request, tern::deadline_after(2s));
        const std::string& answer = answers_[std::min(i++, answers_.size() - 1)];
        (void)peer->write_all(std::as_bytes(std::span(answer)), tern::deadline_after(2s));
        // Held open (a watch stream) until the next connection comes.
        held_ = std::move(*peer);
      }
    });
  }
  ~FakeEtcd() {
    stop_ = true;
    fiber_.interrupt();
    fiber_.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  std::vector<std::string> answers_;
  tern::net::TcpListener listener_;
  tern::net::TcpStream held_;
  std::string endpoint_;
  bool stop_ = false;
  tern::Fiber fiber_;
};

std::string http_answer(int status, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(EtcdNaming, BadEtcdAnswersAreClearErrors) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    const std::string target = "/" + std::string(kService);
    struct Case {
      std::string answer;
      std::string expected;  // in the error's message
    };
    const std::vector<Case> cases = {
        {http_answer(200, "{not json"), "not a JSON object: '{not json'"},
        {http_answer(200, "[1, 2]"), "not a JSON object"},
        {http_answer(400, R"({"error":"etcdserver: bad","message":"etcdserver: bad","code":3})"),
         "etcdserver: bad"},
        {http_answer(200, R"({"header":{"revision":"5"},"kvs":[{"key":"%%%"}]})"), "not base64"},
        {http_answer(200, R"({"header":{}})"), "without a revision"},
        {"SSH-2.0-OpenSSH\r\n\r\n", "status line 'SSH-2.0-OpenSSH'"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size 'zz'"},
    };
    for (const Case& c : cases) {
      FakeEtcd fake({c.answer});
      tern::rpc::Result<Channel> opened =
          Channel::open("etcd://" + fake.endpoint() + target, quick_options());
      ASSERT_FALSE(opened) << c.answer;
      EXPECT_NE(opened.error().message().find(c.expected), std::string::npos)
          << opened.error().to_string();
      EXPECT_NE(opened.error().message().find(fake.endpoint()), std::string::npos)
          << opened.error().to_string();
    }
    // Malformed targets.
    for (const char* bad : {"etcd://127.0.0.1:2379", "etcd:///svc", "etcd://127.0.0.1/svc",
                            "etcd://127.0.0.1:2379/a/b"}) {
      tern::rpc::Result<Channel> opened = Channel::open(bad, quick_options());
      ASSERT_FALSE(opened) << bad;
      EXPECT_EQ(opened.error().code(), StatusCode::invalid_argument) << bad;
    }

    // A good listing, then a watch stream that turns to garbage: the channel keeps the endpoint
    // it listed and goes on calling it.
    Registered a("a", "");
    const std::string value = detail::base64_encode(detail::registration_value({}, a.address));
    const std::string key = detail::base64_encode("/tern/services/x/" + a.address);
    FakeEtcd fake({http_answer(200, R"({"header":{"revision":"7"},"kvs":[{"key":")" + key +
                                        R"(","value":")" + value + R"(","mod_revision":"7"}]})"),
                   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "27\r\n{\"result\":{\"created\":true}}\n{garbage\n\r\n"});
    tern::rpc::Result<Channel> opened =
        Channel::open("etcd://" + fake.endpoint() + target, quick_options());
    ASSERT_TRUE(opened) << opened.error().to_string();
    ASSERT_EQ(opened->endpoints(), std::vector<std::string>{a.address});
    (void)tern::this_fiber::sleep_for(100ms);  // the watch fails and retries meanwhile
    NamingTestClient echo(*opened);
    ClientContext context;
    context.set_timeout(5s);
    context.set_wait_for_ready(true);
    EchoReply reply;
    EXPECT_TRUE(echo.Echo(context, EchoRequest(), reply).ok());
    EXPECT_EQ(opened->endpoints(), std::vector<std::string>{a.address});
    opened->close();
  });
}

TEST(DnsNaming, ResolvesAgainAndFollowsTheName) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    Registered a("a", "");
    Registered b("b", "");
    std::vector<Address> answer = {*Address::parse(a.address)};
    bool failing = false;
    ChannelOptions options = quick_options();
    options.dns_refresh_interval = 20ms;
    options.resolver = [&](std::string_view name) -> tern::Result<std::vector<Address>> {
      EXPECT_EQ(name, "service.test:1");
      if (failing) return tern::fail(std::errc::host_unreachable);
      return answer;
    };
    tern::rpc::Result<Channel> opened = Channel::open("dns://service.test:1", options);
    ASSERT_TRUE(opened) << opened.error().to_string();
    Channel& channel = *opened;
    EXPECT_EQ(channel.endpoints(), std::vector<std::string>{a.address});
    Load load(channel);

    answer.push_back(*Address::parse(b.address));
    ASSERT_TRUE(eventually([&] { return channel.endpoints().size() == 2; }));
    ASSERT_TRUE(eventually([&] { return b.service.echoes > 0; }));

    // Slow calls in flight on `a` when the name stops resolving to it still finish.
    SlowCalls slow(channel, load, a.service, {&a.service, &b.service});
    ASSERT_GT(a.service.sleeping, 0) << slow.failure();
    answer = {*Address::parse(b.address)};
    ASSERT_TRUE(eventually([&] { return channel.endpoints().size() == 1; }));
    EXPECT_GT(a.service.sleeping, 0);  // removed from the set while its calls still run
    EXPECT_EQ(slow.wait(), "");
    EXPECT_EQ(channel.endpoints(), std::vector<std::string>{b.address});

    // While the name does not resolve, the channel keeps what it has.
    failing = true;
    const int calls_before = load.calls();
    ASSERT_TRUE(eventually([&] { return load.calls() > calls_before + 50; }));
    EXPECT_EQ(channel.endpoints(), std::vector<std::string>{b.address});
    load.stop();
    EXPECT_EQ(load.failed(), 0) << load.last_failure();
    channel.close();
  });
}

TEST(EtcdNaming, RegistrationValuesAndHelpers) {
  std::string decoded;
  for (std::string text : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\x00\x01"}) {
    ASSERT_TRUE(detail::base64_decode(detail::base64_encode(text), decoded));
    EXPECT_EQ(decoded, text);
  }
  EXPECT_EQ(detail::base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_FALSE(detail::base64_decode("Zm9", decoded));
  EXPECT_FALSE(detail::base64_decode("Zm=v", decoded));
  EXPECT_EQ(detail::etcd_prefix_end("/a/"), "/a0");

  tern::rpc::RegistryOptions options;
  options.weight = 7;
  options.zone = "eu-1";
  options.metadata = {{"version", "2"}};
  tern::rpc::Result<detail::ResolvedEndpoint> spec =
      detail::parse_registration(detail::registration_value(options, "10.1.2.3:80"));
  ASSERT_TRUE(spec) << spec.error().to_string();
  EXPECT_EQ(spec->name, "10.1.2.3:80");
  EXPECT_EQ(spec->weight, 7u);
  EXPECT_EQ(spec->zone, "eu-1");
  ASSERT_EQ(spec->metadata.size(), 1u);
  EXPECT_EQ(spec->metadata[0].second, "2");
  for (const char* bad :
       {"", "[]", "{}", R"({"address":"nowhere"})", R"({"address":"1.2.3.4:5","weight":-1})",
        R"({"address":"1.2.3.4:5","zone":3})", R"({"address":"1.2.3.4:5","metadata":{"k":1}})"}) {
    EXPECT_FALSE(detail::parse_registration(bad)) << bad;
  }
}

}  // namespace
