// A bidirectional stream across hosts ends with a status on both sides when its peer is killed
// (docs/cluster.md): a Probe/Chat stream between the client host and s1, with s1 SIGKILLed, and
// one between cluster_client on host c2 and s1, with the client SIGKILLed. Nothing hangs and
// nothing ends silently.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <optional>
#include <string>

#include "cluster.tern.h"
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

// How long a side may take to see its peer's death: a correctness bound, not a speed test (a
// killed peer's kernel resets the connection at once).
constexpr std::chrono::seconds kNoticeBound = 10s;
constexpr int kWarmMessages = 10;
// How long a server may take to end the stream of a client whose link was cut: its keepalive
// probes give up after about 3 s (cluster_server's settings).
constexpr std::chrono::seconds kServerNoticeBound = 8s;

using StreamTest = ClusterTest;

// s1 is killed while the client's reading fiber waits for its next message: the read returns a
// status, and a write after it fails too.
TEST_F(StreamTest, KilledServerEndsTheClientsStreamWithAStatus) {
  start_servers(1);
  if (HasFatalFailure()) return;
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(server_targets(), channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    tern::cluster_test::ProbeClient client(*channel);
    tern::rpc::ClientContext context;
    context.set_wait_for_ready();  // no deadline: only the server's death can end the stream
    auto stream = client.Chat(context);
    tern::cluster_test::WhoRequest request;
    tern::cluster_test::WhoReply reply;
    for (int i = 0; i < kWarmMessages; ++i) {
      request.set_seq(static_cast<std::uint64_t>(i));
      ASSERT_TRUE(stream.write(request).ok());
      tern::rpc::Result<bool> got = stream.read(reply);
      ASSERT_TRUE(got.has_value() && *got) << (got ? "end of stream" : got.error().to_string());
      EXPECT_EQ(reply.server(), "s1");
      EXPECT_EQ(reply.seq(), static_cast<std::uint64_t>(i));
    }

    std::optional<tern::rpc::Result<bool>> ended;
    Clock::time_point ended_at;
    tern::Fiber reader = tern::spawn([&] {
      tern::cluster_test::WhoReply next;
      ended = stream.read(next);
      ended_at = Clock::now();
    });
    const Clock::time_point killed = Clock::now();
    servers_[0]->signal(SIGKILL);
    const bool noticed = tern_test::wait_until_condition([&] { return ended.has_value(); },
                                                         deadline_after(kNoticeBound));
    if (!noticed) stream.cancel();  // lets the reader return, so the test can end
    reader.join();
    ASSERT_TRUE(noticed) << "the client's read still waits " << kNoticeBound.count()
                         << " s after the server died";
    ASSERT_FALSE(ended->has_value()) << "the stream ended as if the server had closed it";
    EXPECT_FALSE(stream.write(request).ok()) << "a write succeeded on a dead stream";
    report_figure("stream: server killed, the client's stream ends",
                  fmt::format("{:.1f} ms after the kill, with {}", ms_between(killed, ended_at),
                              ended->error().to_string()));
    channel->close();
  });
}

// cluster_client on host c2 keeps a stream to s1 busy and is killed: s1's handler sees its
// stream end with a status (its log says which).
TEST_F(StreamTest, KilledClientEndsTheServersStreamWithAStatus) {
  start_servers(1);
  if (HasFatalFailure()) return;
  std::string why;
  const Host* other = network().add_host("c2", 3, &why);
  ASSERT_NE(other, nullptr) << why;
  HostProcess chatter(network().in_host(*other, {CLUSTER_CLIENT_BINARY, "--target",
                                                 server_targets(), "--io", backend()}),
                      network().work_dir() + "/c2.log");
  ASSERT_TRUE(chatter.wait_for_output("cluster_client: chatting with s1", 20s)) << chatter.log();
  const std::size_t from = servers_[0]->log().size();
  const Clock::time_point killed = Clock::now();
  chatter.kill();
  ASSERT_TRUE(servers_[0]->wait_for_output("chat ended:", kNoticeBound, from))
      << "s1's handler still waits on a stream whose client died: " << servers_[0]->log();
  const Clock::time_point noticed = Clock::now();
  const std::string log = servers_[0]->log().substr(from);
  const std::size_t at = log.find("chat ended:");
  const std::string line = log.substr(at, log.find('\n', at) - at);
  EXPECT_EQ(line.find("chat ended: ok"), std::string::npos) << line;
  report_figure("stream: client killed, the server's stream ends",
                fmt::format("within {:.1f} ms of the kill, with {}", ms_between(killed, noticed),
                            line.substr(std::string_view("chat ended: ").size())));
}

// The client host's link is cut while a stream is open (no reset reaches either side): the
// client's pings find the connection dead and its read ends with a status; s1's handler must end
// its side too rather than wait for a peer that is gone.
TEST_F(StreamTest, CutLinkEndsTheStreamOnBothSides) {
  start_servers(1);
  if (HasFatalFailure()) return;
  run_in_client([&] {
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(server_targets(), channel_options());
    ASSERT_TRUE(channel.has_value()) << channel.error().message();
    tern::cluster_test::ProbeClient probe(*channel);
    tern::rpc::ClientContext context;
    context.set_wait_for_ready();
    auto stream = probe.Chat(context);
    tern::cluster_test::WhoRequest request;
    tern::cluster_test::WhoReply reply;
    ASSERT_TRUE(stream.write(request).ok());
    ASSERT_TRUE(stream.read(reply).value_or(false));
    const std::size_t from = servers_[0]->log().size();

    std::optional<tern::rpc::Result<bool>> ended;
    Clock::time_point ended_at;
    tern::Fiber reader = tern::spawn([&] {
      tern::cluster_test::WhoReply next;
      ended = stream.read(next);
      ended_at = Clock::now();
    });
    const Clock::time_point cut = Clock::now();
    ASSERT_TRUE(tern::io::offload([&] { return network().set_link(client(), false); }));
    const bool noticed = tern_test::wait_until_condition([&] { return ended.has_value(); },
                                                         deadline_after(kNoticeBound));
    if (!noticed) stream.cancel();
    reader.join();
    EXPECT_TRUE(noticed) << "the client's read still waits " << kNoticeBound.count()
                         << " s after its link was cut";
    const bool server_ended = tern::io::offload(
        [&] { return servers_[0]->wait_for_output("chat ended:", kServerNoticeBound, from); });
    const Clock::time_point server_at = Clock::now();
    ASSERT_TRUE(tern::io::offload([&] { return network().set_link(client(), true); }));
    channel->close();
    if (noticed) {
      EXPECT_FALSE(ended->has_value());
      report_figure("stream: client's link cut, the client's stream ends",
                    fmt::format("{:.1f} ms after the cut", ms_between(cut, ended_at)));
    }
    // The server finds the silent client through keepalive probes (cluster_server probes after
    // 1 s of silence, 2 probes 1 s apart) and ends the handler's stream.
    EXPECT_TRUE(server_ended) << "s1's stream handler still waits " << kServerNoticeBound.count()
                              << " s after its client's link was cut";
    if (server_ended) {
      report_figure("stream: client's link cut, the server's stream ends",
                    fmt::format("within {:.1f} ms of the cut", ms_between(cut, server_at)));
    }
  });
}

}  // namespace
}  // namespace cluster_test
