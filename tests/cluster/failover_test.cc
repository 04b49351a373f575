// Failover across hosts (docs/cluster.md): three cluster_server hosts behind one rpc::Channel on
// a client host, under load from caller fibers whose calls are idempotent. A server SIGKILLed, a
// server host whose link is cut and restored, a server frozen with SIGSTOP and resumed, and a
// rolling restart of every server: no
// idempotent call is lost, every call returns within its deadline, and the figures (time to the
// first successful retry, to detect a cut link, to recover) are printed.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "cluster_fixture.h"
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

class FailoverTest : public ClusterTest {
 protected:
  // Opens the channel to s1..s3, starts the load and waits until every server has answered.
  // Returns false (with a failure) if that does not happen within kPatience.
  bool start_load(tern::rpc::Channel& channel, ProbeLoad& load) {
    const tern::rpc::Status connected = channel.wait_connected(deadline_after(kPatience));
    EXPECT_TRUE(connected.ok()) << connected.to_string();
    load.start();
    return connected.ok() && all_servers_answer(load, Clock::now());
  }
};

// SIGKILL one server under load: the calls in flight on it fail over to the other two (they are
// idempotent), none is lost, none hangs.
TEST_F(FailoverTest, SigkilledServerLosesNoIdempotentCall) {
  start_servers(3);
  if (HasFatalFailure()) return;
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(server_targets(), channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    ProbeLoad load(*channel, callers(), kCallTimeout);
    if (!start_load(*channel, load)) return;

    const Clock::time_point killed = Clock::now();
    servers_[1]->signal(SIGKILL);
    const bool kept_answering = others_keep_answering(load, "s2", killed);
    load.stop();
    channel->close();
    if (!kept_answering) return;

    expect_no_call_lost(load);
    // Calls that were on s2 when it died and succeeded on another server: their first success.
    const std::optional<Clock::time_point> retried = load.first_ok(killed - kCallTimeout, {}, 2);
    const std::size_t after = load.calls().size();
    report_figure("sigkill: first successful retry elsewhere",
                  retried ? fmt::format("{:.1f} ms after the kill", ms_between(killed, *retried))
                          : std::string("no call was in flight on the killed server"));
    report_figure("sigkill: idempotent calls lost", fmt::format("{} of {}", load.failed(), after));
  });
}

// Cut s3's link (`ip link set eth0 down` in its namespace: its packets stop, nobody gets a
// reset): the calls on s3 stall until the channel's pings give up on its connections, then fail
// over to s1 and s3's breaker opens; traffic goes to s1 and s2 only. Once the link is back the
// breaker's probe succeeds, it closes, and s3 answers again. No call is lost.
TEST_F(FailoverTest, CutLinkOpensTheBreakerAndRecovers) {
  start_servers(3);
  if (HasFatalFailure()) return;
  const Host& cut_host = *server_hosts_[2];
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(server_targets(), channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    ProbeLoad load(*channel, callers(), kCallTimeout);
    if (!start_load(*channel, load)) return;

    const std::uint64_t ejections_before = channel->stats().ejections;
    const Clock::time_point cut = Clock::now();
    ASSERT_TRUE(tern::io::offload([&] { return network().set_link(cut_host, false); }));
    // Detected: s3's breaker is open (its calls failed when its connections were dropped).
    const bool detected = tern_test::wait_until_condition(
        [&] {
          const auto status = endpoint_status(*channel, cut_host);
          return status && status->breaker == "open";
        },
        deadline_after(kPatience));
    const Clock::time_point detected_at = Clock::now();
    EXPECT_TRUE(detected) << "s3's breaker never opened: " << load.summary();
    EXPECT_GT(channel->stats().ejections, ejections_before);
    const bool moved_away = detected && others_keep_answering(load, "s3", detected_at);

    const Clock::time_point restored = Clock::now();
    ASSERT_TRUE(tern::io::offload([&] { return network().set_link(cut_host, true); }));
    const bool back = tern_test::wait_until_condition(
        [&] {
          const auto status = endpoint_status(*channel, cut_host);
          return status && status->breaker == "closed" && load.served_by("s3", restored) > 0;
        },
        deadline_after(kPatience));
    const Clock::time_point back_at = Clock::now();
    load.stop();
    channel->close();
    EXPECT_TRUE(back) << "s3 never came back after its link did: " << load.summary();
    if (!moved_away || !back) return;

    expect_no_call_lost(load);
    EXPECT_EQ(load.served_by("s3", detected_at) - load.served_by("s3", restored), 0u)
        << "s3 answered while its link was down";
    report_figure("link cut: time to detect (breaker open)",
                  fmt::format("{:.1f} ms", ms_between(cut, detected_at)));
    report_figure("link cut: time to recover after the link is back (breaker closed, s3 answers)",
                  fmt::format("{:.1f} ms", ms_between(restored, back_at)));
    report_figure("link cut: idempotent calls lost",
                  fmt::format("{} of {}", load.failed(), load.calls().size()));
  });
}

// Freeze s2 with SIGSTOP (a hung process: its connections stay open, its kernel still
// acknowledges bytes, nothing is answered): the channel drops its connections for their missing
// pongs and moves the calls to s1 and s3; after SIGCONT it reconnects and s2 answers again.
TEST_F(FailoverTest, FrozenServerIsDetectedAndRecovered) {
  start_servers(3);
  if (HasFatalFailure()) return;
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(server_targets(), channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    ProbeLoad load(*channel, callers(), kCallTimeout);
    if (!start_load(*channel, load)) return;

    const std::uint64_t losses_before = channel->stats().connection_losses;
    const std::size_t connections = channel_options().connections_per_endpoint;
    const Clock::time_point frozen = Clock::now();
    servers_[1]->signal(SIGSTOP);
    const bool detected = tern_test::wait_until_condition(
        [&] { return channel->stats().connection_losses >= losses_before + connections; },
        deadline_after(kPatience));
    const Clock::time_point detected_at = Clock::now();
    EXPECT_TRUE(detected) << "s2's connections were never dropped: " << load.summary();
    const bool moved_away = detected && others_keep_answering(load, "s2", detected_at);

    const Clock::time_point resumed = Clock::now();
    servers_[1]->signal(SIGCONT);
    const bool back = tern_test::wait_until_condition(
        [&] { return load.served_by("s2", resumed) > 0; }, deadline_after(kPatience));
    load.stop();
    channel->close();
    EXPECT_TRUE(back) << "s2 never answered after SIGCONT: " << load.summary();
    if (!moved_away || !back) return;

    expect_no_call_lost(load);
    report_figure("sigstop: time to detect",
                  fmt::format("{:.1f} ms", ms_between(frozen, detected_at)));
    report_figure("sigstop: time to recover after SIGCONT",
                  fmt::format("{:.1f} ms", ms_between(resumed, *load.first_ok(resumed, "s2"))));
    report_figure("sigstop: idempotent calls lost",
                  fmt::format("{} of {}", load.failed(), load.calls().size()));
  });
}

// Restart s1, s2, s3 one after the other (SIGTERM: goaway, calls in flight finish; then the same
// address again), each once the previous one answers again: no call fails.
TEST_F(FailoverTest, RollingRestartLosesNoIdempotentCall) {
  start_servers(3);
  if (HasFatalFailure()) return;
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(server_targets(), channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    ProbeLoad load(*channel, callers(), kCallTimeout);
    if (!start_load(*channel, load)) return;

    const std::optional<double> slowest_back = restart_each_server(load);
    load.stop();
    channel->close();
    if (!slowest_back) return;
    report_figure("rolling restart: idempotent calls failed",
                  fmt::format("{} of {}", load.failed(), load.calls().size()));
    report_figure("rolling restart: longest time from listening to answering",
                  fmt::format("{:.1f} ms", *slowest_back));
    expect_no_call_lost(load);
  });
}

}  // namespace
}  // namespace cluster_test
