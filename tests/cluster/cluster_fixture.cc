// ClusterTest: the network, client host and servers the scenarios share.
#include "cluster_fixture.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/offload.h"
#include "test_scale.h"
#include "wait_for_condition.h"

namespace cluster_test {

using namespace std::chrono_literals;

std::string backend() {
  const char* io = std::getenv("TERN_IO");
  return io != nullptr ? io : "auto";
}

void ClusterTest::SetUp() {
  static const std::string unavailable = netns_unavailable();
  if (!unavailable.empty()) GTEST_SKIP() << "cluster tests skipped: " << unavailable;
  std::string why;
  network_ = Network::create(&why);
  ASSERT_NE(network_, nullptr) << why;
  client_ = network_->add_host("c1", 2, &why);
  ASSERT_NE(client_, nullptr) << why;
}

void ClusterTest::TearDown() {
  servers_.clear();
  if (network_ != nullptr && HasFailure()) network_->keep_work_dir();
  network_.reset();
}

void ClusterTest::start_servers(int count) {
  for (int i = 0; i < count; ++i) {
    ASSERT_NE(add_server_host(), nullptr);
    ASSERT_TRUE(start_server(server_hosts_.size() - 1));
  }
}

const Host* ClusterTest::add_server_host() {
  const int n = static_cast<int>(server_hosts_.size()) + 1;
  std::string why;
  const Host* host = network_->add_host("s" + std::to_string(n), 10 + n, &why);
  if (host == nullptr) {
    ADD_FAILURE() << why;
    return nullptr;
  }
  server_hosts_.push_back(host);
  servers_.emplace_back();
  return host;
}

bool ClusterTest::start_server(std::size_t index) {
  const Host& host = *server_hosts_.at(index);
  const std::string log = network_->work_dir() + "/" + host.name + ".log";
  auto& server = servers_.at(index);
  server.reset();
  // Each start appends to the log: look only past what earlier runs of this server wrote.
  const std::size_t from = std::filesystem::exists(log) ? std::filesystem::file_size(log) : 0;
  std::vector<std::string> args = {CLUSTER_SERVER_BINARY,
                                   "--name",
                                   host.name,
                                   "--listen",
                                   host.address + ":" + std::to_string(kServerPort),
                                   "--io",
                                   backend()};
  args.insert(args.end(), server_args_.begin(), server_args_.end());
  server = std::make_unique<HostProcess>(network_->in_host(host, std::move(args)), log);
  const std::string ready = "cluster_server " + host.name + ": listening on";
  if (!server->running() || !server->wait_for_output(ready, 20s, from)) {
    ADD_FAILURE() << host.name << " did not start: " << server->log();
    return false;
  }
  return true;
}

std::string ClusterTest::server_targets() const {
  std::string targets;
  for (const Host* host : server_hosts_) {
    targets += (targets.empty() ? "" : ",") + host->address + ":" + std::to_string(kServerPort);
  }
  return targets;
}

void ClusterTest::run_in_client(const std::function<void()>& body) {
  const EnterHost inside(*client_);
  ASSERT_TRUE(inside.entered()) << "cannot enter " << client_->netns;
  const tern::Result<tern::io::BackendChoice> choice = tern::io::parse_backend(backend());
  ASSERT_TRUE(choice.has_value());
  tern::Runtime runtime({.workers = 1, .make_parker = tern::io::reactors(*choice)});
  runtime.run(body);
}

tern::rpc::ChannelOptions ClusterTest::channel_options() {
  tern::rpc::ChannelOptions options;
  options.ping_interval = 100ms;
  options.ping_timeout = 200ms;
  options.reconnect.initial_backoff = 50ms;
  options.reconnect.max_backoff = 200ms;
  options.reconnect.attempt_timeout = 200ms;
  options.max_retries = 2;
  options.health_check.interval = 100ms;
  options.health_check.timeout = 100ms;
  options.health_check.unhealthy_after = 2;
  options.breaker.consecutive_failures = 3;
  options.breaker.base_ejection = 200ms;
  options.breaker.max_ejection = 1s;
  return options;
}

std::optional<tern::rpc::EndpointStatus> ClusterTest::endpoint_status(
    const tern::rpc::Channel& channel, const Host& host) {
  const std::string name = host.address + ":" + std::to_string(kServerPort);
  for (tern::rpc::EndpointStatus& status : channel.endpoint_status()) {
    if (status.name == name) return std::move(status);
  }
  return std::nullopt;
}

int ClusterTest::callers() { return std::max(4, tern_test::scaled(16)); }

bool ClusterTest::all_servers_answer(const ProbeLoad& load, tern::Clock::time_point from) {
  const bool answered = tern_test::wait_until_condition(
      [&] {
        return std::all_of(server_hosts_.begin(), server_hosts_.end(),
                           [&](const Host* host) { return load.served_by(host->name, from) > 0; });
      },
      tern::deadline_after(kPatience));
  EXPECT_TRUE(answered) << "not every server answered: " << load.summary();
  return answered;
}

bool ClusterTest::others_keep_answering(const ProbeLoad& load, const std::string& down,
                                        tern::Clock::time_point from) {
  const bool answered = tern_test::wait_until_condition(
      [&] {
        return std::all_of(server_hosts_.begin(), server_hosts_.end(), [&](const Host* host) {
          return host->name == down || load.served_by(host->name, from) >= kCallsAfterFault;
        });
      },
      tern::deadline_after(kPatience));
  EXPECT_TRUE(answered) << "not every server " << (down.empty() ? "" : "but " + down + " ")
                        << "kept answering: " << load.summary();
  return answered;
}

std::optional<double> ClusterTest::restart_each_server(const ProbeLoad& load) {
  double slowest_back = 0;
  for (std::size_t i = 0; i < server_hosts_.size(); ++i) {
    const std::string& name = server_hosts_[i]->name;
    const int status = tern::io::offload([&] { return servers_[i]->terminate(10s); });
    EXPECT_EQ(status, 0) << name << " did not stop gracefully";
    const bool restarted = tern::io::offload([&] { return start_server(i); });
    const tern::Clock::time_point listening = tern::Clock::now();
    const bool back = restarted && tern_test::wait_until_condition(
                                       [&] { return load.served_by(name, listening) > 0; },
                                       tern::deadline_after(kPatience));
    EXPECT_TRUE(back) << name << " never answered after its restart: " << load.summary();
    if (!back) return std::nullopt;
    slowest_back = std::max(slowest_back, ms_between(listening, *load.first_ok(listening, name)));
  }
  return slowest_back;
}

void ClusterTest::expect_no_call_lost(const ProbeLoad& load) {
  EXPECT_EQ(load.failed(), 0u) << "idempotent calls lost: " << load.summary();
  EXPECT_LE(load.longest(), kCallTimeout + kLateMargin) << load.summary();
}

void ClusterTest::report_figure(const std::string& name, const std::string& value) {
  std::printf("[cluster figure] %s (%s): %s\n", name.c_str(), backend().c_str(), value.c_str());
  std::fflush(stdout);
  RecordProperty(name, value);
}

}  // namespace cluster_test
