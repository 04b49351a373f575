// Service discovery on a real 3-member etcd cluster across hosts (docs/cluster.md): members
// e1..e3 on three hosts, cluster_server on three more registering in it, and a client on its own
// host whose rpc::Channel follows "etcd://e1,e2,e3/tern.cluster_test.Probe". Losing etcd's quorum
// costs the client nothing (it keeps the servers it knows), registration resumes once a quorum is
// back, and a rolling restart behind etcd fails no call.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "cluster_fixture.h"
#include "etcd_cluster.h"
#include "fmt/format.h"
#include "probe_load.h"
#include "tern/fiber/fiber.h"
#include "tern/io/offload.h"
#include "tern/rpc/channel.h"
#include "wait_for_condition.h"

namespace cluster_test {
namespace {

using namespace std::chrono_literals;
using tern::Clock;
using tern::deadline_after;

class EtcdTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (const std::string why = EtcdCluster::unavailable(); !why.empty()) {
      GTEST_SKIP() << "etcd scenarios skipped: " << why;
    }
    std::string why;
    etcd_ = std::make_unique<EtcdCluster>(network(), 3, &why);
    ASSERT_TRUE(etcd_->started()) << why;
  }
  void TearDown() override {
    etcd_.reset();
    ClusterTest::TearDown();
  }

  // Servers that register in the cluster; the client's etcd:// target of their service.
  void start_registered_servers(int count) {
    server_args_ = {"--etcd", etcd_->endpoints()};
    start_servers(count);
  }
  std::string etcd_target() const {
    return "etcd://" + etcd_->endpoints() + "/tern.cluster_test.Probe";
  }
  static tern::rpc::ChannelOptions etcd_channel_options() {
    tern::rpc::ChannelOptions options = channel_options();
    options.etcd_timeout = 500ms;
    options.etcd_max_backoff = 500ms;
    return options;
  }

  // Waits until the channel lists every server host's endpoint and each has answered `load`.
  bool all_servers_followed(const tern::rpc::Channel& channel, const ProbeLoad& load,
                            Clock::time_point from) {
    const bool followed = tern_test::wait_until_condition(
        [&] {
          return channel.endpoints().size() == server_hosts_.size() &&
                 std::all_of(server_hosts_.begin(), server_hosts_.end(), [&](const Host* host) {
                   return load.served_by(host->name, from) > 0;
                 });
        },
        deadline_after(kPatience));
    EXPECT_TRUE(followed) << "the channel follows " << channel.endpoints().size() << " of "
                          << server_hosts_.size() << " servers: " << load.summary();
    return followed;
  }

  std::unique_ptr<EtcdCluster> etcd_;
};

// The servers register in etcd and the client follows them. A follower member is killed, then
// the leader: etcd has no quorum (it refuses writes), yet the client keeps its three endpoints
// and every call succeeds. A fourth server started then cannot register; once a member is back
// and etcd has a quorum again, its registration goes through and the client sends it calls.
TEST_F(EtcdTest, ClientKeepsItsEndpointsWithoutQuorumAndRegistrationResumes) {
  start_registered_servers(3);
  if (HasFatalFailure()) return;
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(etcd_target(), etcd_channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    ProbeLoad load(*channel, callers(), kCallTimeout);
    load.start();
    if (!all_servers_followed(*channel, load, Clock::now())) return;

    const int leader = tern::io::offload([&] { return etcd_->leader(client()); });
    ASSERT_GE(leader, 0) << "no etcd leader";
    const std::size_t follower = leader == 0 ? 1 : 0;
    tern::io::offload([&] { etcd_->kill(follower); });
    tern::io::offload([&] { etcd_->kill(static_cast<std::size_t>(leader)); });
    const Clock::time_point lost = Clock::now();
    EXPECT_FALSE(tern::io::offload([&] { return etcd_->put(client(), "/probe", "x", 1s); }))
        << "etcd still has a quorum with one member of three";
    // The channel keeps every endpoint it knew, and they all keep answering.
    const bool kept = others_keep_answering(load, "", lost);
    EXPECT_EQ(channel->endpoints().size(), 3u);

    // A server started while etcd has no quorum cannot register yet.
    const Host* late = add_server_host();
    ASSERT_NE(late, nullptr);
    ASSERT_TRUE(tern::io::offload([&] { return start_server(server_hosts_.size() - 1); }));
    EXPECT_TRUE(tern::io::offload([&] {
      return servers_.back()->wait_for_output("in etcd failed", kPatience);
    })) << late->name
        << " did not try to register: " << servers_.back()->log();
    EXPECT_EQ(channel->endpoints().size(), 3u) << late->name << " registered without a quorum";
    std::string why;
    ASSERT_TRUE(tern::io::offload([&] { return etcd_->start(follower, &why); })) << why;
    const Clock::time_point quorum = Clock::now();
    const bool joined = tern_test::wait_until_condition(
        [&] { return load.served_by(late->name, quorum) > 0; }, deadline_after(kPatience));
    const Clock::time_point joined_at = Clock::now();
    load.stop();
    channel->close();
    EXPECT_TRUE(joined) << late->name
                        << " never got a call after etcd regained its quorum: " << load.summary();
    if (!kept || !joined) return;
    expect_no_call_lost(load);
    report_figure("etcd quorum lost: idempotent calls lost",
                  fmt::format("{} of {}", load.failed(), load.calls().size()));
    report_figure("etcd quorum back: time until a server started meanwhile gets calls",
                  fmt::format("{:.1f} ms", ms_between(quorum, joined_at)));
  });
}

// Restart the three registered servers one after the other (SIGTERM: each revokes its
// registration, waits for clients to drop it, then drains; then it starts again and registers):
// the client follows etcd and no call fails.
TEST_F(EtcdTest, RollingRestartBehindEtcdLosesNoCall) {
  start_registered_servers(3);
  if (HasFatalFailure()) return;
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(etcd_target(), etcd_channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    ProbeLoad load(*channel, callers(), kCallTimeout);
    load.start();
    if (!all_servers_followed(*channel, load, Clock::now())) return;

    const std::optional<double> slowest_back = restart_each_server(load);
    load.stop();
    channel->close();
    if (!slowest_back) return;
    expect_no_call_lost(load);
    report_figure("rolling restart behind etcd: idempotent calls lost",
                  fmt::format("{} of {}", load.failed(), load.calls().size()));
    report_figure(
        "rolling restart behind etcd: longest time from listening to answering (registration "
        "and watch included)",
        fmt::format("{:.1f} ms", *slowest_back));
  });
}

}  // namespace
}  // namespace cluster_test
