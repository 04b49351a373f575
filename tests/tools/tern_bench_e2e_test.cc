// tern-bench end to end: the real binary against tern-echo (and small servers written here that
// echo byte for byte, flip a byte or stop reading) under the backend named by TERN_IO. Each run
// is short (about a second or a small count) and prints one JSON line, which is checked. The
// sections name the benchmark report each mode reproduces (docs/benchmark-methods.md).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tern_bench_process.h"
#include "tern_bench_report.h"

namespace tern::test {
namespace {

using Json = nlohmann::json;

std::string target(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }

// tern-echo in `mode` on a kernel-chosen port, two workers, the backend under test.
class TernEcho : public ServerProcess {
 public:
  explicit TernEcho(const std::string& mode, std::vector<std::string> more = {})
      : ServerProcess(command(mode, std::move(more))) {}

 private:
  static std::vector<std::string> command(const std::string& mode, std::vector<std::string> more) {
    std::vector<std::string> args = {TERN_ECHO_BINARY, "--port",  "0",      "--threads", "2",
                                     "--io",           backend(), "--mode", mode};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
};

// Runs tern-bench with `args` (the subcommand first), plus --json, the backend and, unless
// `progress`, --quiet.
ToolRun bench(std::vector<std::string> args, bool progress = false) {
  args.insert(args.begin(), TERN_BENCH_BINARY);
  if (args.size() > 1 && args[1] != "switch" && args[1] != "log") {
    args.insert(args.end(), {"--io", backend()});
  }
  args.push_back("--json");
  if (!progress) args.push_back("--quiet");
  return run_tool(std::move(args));
}

// Checks what every good run reports.
void expect_verified(const ToolRun& run, const Json& report, const std::string& mode) {
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_EQ(report["tool"], "tern-bench");
  EXPECT_EQ(report["mode"], mode);
  EXPECT_EQ(report["verified"], true) << report.dump();
  EXPECT_EQ(report["errors"], 0) << report.dump();
  EXPECT_TRUE(report["client_cpu_pct"].is_number()) << report.dump();
  // How the machine spent the run: five shares of all CPUs' time that add up to 100% (null in a
  // run shorter than a clock tick).
  const Json& machine = report["machine_cpu"];
  if (machine.is_null()) return;
  ASSERT_TRUE(machine.is_object()) << report.dump();
  EXPECT_GE(machine["cpus"].get<int>(), 1) << report.dump();
  double total = 0;
  for (const char* share : {"user_pct", "system_pct", "irq_pct", "idle_pct", "steal_pct"}) {
    ASSERT_TRUE(machine[share].is_number()) << share << " in " << report.dump();
    EXPECT_GE(machine[share].get<double>(), 0) << share << " in " << report.dump();
    total += machine[share].get<double>();
  }
  EXPECT_NEAR(total, 100.0, 0.5) << report.dump();
}

void expect_positive(const Json& figures, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    ASSERT_TRUE(figures.contains(name)) << name << " in " << figures.dump();
    ASSERT_TRUE(figures[name].is_number()) << name << " in " << figures.dump();
    EXPECT_GT(figures[name].get<double>(), 0) << name << " in " << figures.dump();
  }
}

// ---- traffic (report 000) ----

TEST(TernBench, TrafficSyncEchoAgainstFrame16) {
  TernEcho server("frame16");
  ASSERT_GT(server.port(), 0) << server.first_line();
  const ToolRun run =
      bench({"traffic", target(server.port()), "-S", "-t", "2", "-s", "512", "--duration", "1",
             "--workers", "1", "--interval", "0.25", "--server-pid", std::to_string(server.pid())},
            true);
  const Json r = report_of(run);
  expect_verified(run, r, "traffic");
  EXPECT_EQ(r["target"], "tern");
  EXPECT_EQ(r["params"]["threads"], 2);
  EXPECT_EQ(r["params"]["payload_bytes"], 512);
  EXPECT_EQ(r["params"]["cmd"], 1);
  EXPECT_EQ(r["params"]["sync"], true);
  EXPECT_EQ(r["params"]["workers"], 1);
  EXPECT_EQ(r["params"]["target_address"], target(server.port()));
  if (backend() != "auto") {
    EXPECT_EQ(r["params"]["io"], backend());
  }
  expect_positive(r["figures"], {"packets", "pkg_per_s", "mb_per_s", "mean_us", "p50_us", "p90_us",
                                 "p99_us", "p999_us", "max_us"});
  EXPECT_EQ(r["figures"]["packets"], r["figures"]["replies"]);
  EXPECT_TRUE(r["server_cpu_pct"].is_number()) << r.dump();
  // Progress: report 000's send/recv pair every --interval, on stderr only.
  EXPECT_NE(run.err.find("s] send "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" MB/s  recv "), std::string::npos) << run.err;
}

TEST(TernBench, TrafficPipelinedWithAWindowAndWithACount) {
  TernEcho server("frame16");
  ASSERT_GT(server.port(), 0);
  ToolRun run = bench(
      {"traffic", target(server.port()), "-A", "--window", "8", "-t", "2", "--duration", "1"});
  Json r = report_of(run);
  expect_verified(run, r, "traffic");
  EXPECT_EQ(r["params"]["sync"], false);
  EXPECT_EQ(r["params"]["window"], 8);
  expect_positive(r["figures"], {"packets", "pkg_per_s", "mb_per_s", "p99_us"});

  run = bench({"traffic", target(server.port()), "-A", "-t", "3", "--count", "20000"});
  r = report_of(run);
  expect_verified(run, r, "traffic");
  EXPECT_EQ(r["figures"]["packets"], 20000) << "every request of the count, each replied to";
  EXPECT_EQ(r["figures"]["sent"], 20000);
  EXPECT_EQ(r["params"]["duration_s"], 0);
}

TEST(TernBench, TrafficDiscardCountsSentRequestsTheServerRead) {
  TernEcho server("frame16");
  ASSERT_GT(server.port(), 0);
  const ToolRun run =
      bench({"traffic", target(server.port()), "-A", "-c", "2", "-t", "2", "--duration", "1"});
  const Json r = report_of(run);
  expect_verified(run, r, "traffic");
  EXPECT_EQ(r["params"]["cmd"], 2);
  expect_positive(r["figures"], {"packets", "pkg_per_s", "mb_per_s"});
  EXPECT_EQ(r["figures"]["replies"], 0);
}

// ---- servers written here ----

// A blocking thread-per-connection echo server on 127.0.0.1 that flips one byte of each
// connection's stream (at `flip_at`; negative: none), or, with `read_limit` >= 0, reads that many
// bytes and closes with the rest unread.
class LocalServer {
 public:
  explicit LocalServer(long flip_at, long read_limit = -1)
      : flip_at_(flip_at), read_limit_(read_limit) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listener_, 128) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      return;
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~LocalServer() {
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    ::close(listener_);
    std::lock_guard lock(mutex_);
    for (std::thread& t : connections_) t.join();
  }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;
  int port() const { return port_; }

 private:
  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::lock_guard lock(mutex_);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }
  void serve(int fd) {
    char buf[16384];
    long offset = 0;
    for (;;) {
      std::size_t want = sizeof buf;
      if (read_limit_ >= 0)
        want = static_cast<std::size_t>(std::min<long>(want, read_limit_ - offset));
      if (want == 0) break;
      const ssize_t n = ::recv(fd, buf, want, 0);
      if (n <= 0) break;
      if (flip_at_ >= offset && flip_at_ < offset + n) buf[flip_at_ - offset] ^= 0x01;
      offset += n;
      if (read_limit_ >= 0) continue;
      for (ssize_t sent = 0; sent < n;) {
        const ssize_t m = ::send(fd, buf + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
        if (m <= 0) {
          ::close(fd);
          return;
        }
        sent += m;
      }
    }
    ::close(fd);
  }
  long flip_at_;
  long read_limit_;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> connections_;
};

TEST(TernBench, TrafficAgainstAByteExactEchoServerPasses) {
  LocalServer echo(-1);
  ASSERT_GT(echo.port(), 0);
  const ToolRun run = bench(
      {"traffic", target(echo.port()), "-A", "-t", "2", "--count", "3000", "--name", "byte-echo"});
  const Json r = report_of(run);
  expect_verified(run, r, "traffic");
  EXPECT_EQ(r["target"], "byte-echo");
  EXPECT_EQ(r["figures"]["packets"], 3000);
}

// ---- pingpong (report 003) ----

TEST(TernBench, PingpongMovesAndChecksEveryByte) {
  TernEcho server("echo");
  ASSERT_GT(server.port(), 0);
  const ToolRun run = bench({"pingpong", target(server.port()), "--threads", "2", "--sessions", "4",
                             "--block", "4096", "--duration", "1"});
  const Json r = report_of(run);
  expect_verified(run, r, "pingpong");
  EXPECT_EQ(r["params"]["threads"], 2);
  EXPECT_EQ(r["params"]["block_bytes"], 4096);
  EXPECT_EQ(r["params"]["sessions"], 4);
  expect_positive(r["figures"], {"bytes", "mb_per_s", "mib_per_s", "min_session_bytes",
                                 "trip_p50_us", "trip_p99_us"});
  EXPECT_NEAR(r["figures"]["mb_per_s"].get<double>() / r["figures"]["mib_per_s"].get<double>(),
              1.048576, 0.001);
  // A one-second window spans about 100 clock ticks per CPU: the machine's split is measured.
  EXPECT_TRUE(r["machine_cpu"].is_object()) << r.dump();

  // Server and client polling when idle (--idle-poll) move and check the same bytes.
  TernEcho polling("echo", {"--idle-poll", "200us"});
  const Json p = report_of(bench({"pingpong", target(polling.port()), "--block", "4096",
                                  "--duration", "0.5", "--idle-poll", "200us"}));
  EXPECT_EQ(p["verified"], true) << p.dump();
  EXPECT_EQ(p["params"]["idle_poll_us"], 200) << p.dump();
}

// ---- sessions (report 004) ----

TEST(TernBench, SessionsRunEveryOneAndCheckEveryReply) {
  TernEcho server("echo");
  ASSERT_GT(server.port(), 0);
  const ToolRun run = bench({"sessions", target(server.port()), "--total", "300", "--in-flight",
                             "20", "--messages", "3", "--size", "8"});
  const Json r = report_of(run);
  expect_verified(run, r, "sessions");
  EXPECT_EQ(r["params"]["total"], 300);
  EXPECT_EQ(r["params"]["in_flight"], 20);
  EXPECT_EQ(r["params"]["workers"], 1);
  EXPECT_EQ(r["figures"]["sessions"], 300);
  EXPECT_EQ(r["figures"]["failed"], 0);
  expect_positive(r["figures"], {"sessions_per_s", "mean_us", "p50_us", "p99_us", "max_us",
                                 "connect_p50_us", "connect_p99_us"});
  EXPECT_TRUE(r["params"]["tcp_tw_reuse"].is_string());
  // The machine's counters of SYNs dropped by a full listen queue and sent again (/proc/net).
  EXPECT_TRUE(r["figures"]["listen_overflows"].is_number());
  EXPECT_TRUE(r["figures"]["syn_retransmits"].is_number());
}

// --sources spreads the sessions over loopback source addresses 127.0.0.1..N (each with the
// ephemeral port range to itself); only for an IPv4 loopback target.
TEST(TernBench, SessionsFromSeveralSourceAddresses) {
  TernEcho server("echo");
  ASSERT_GT(server.port(), 0);
  const ToolRun run = bench(
      {"sessions", target(server.port()), "--total", "200", "--in-flight", "20", "--sources", "4"});
  const Json r = report_of(run);
  expect_verified(run, r, "sessions");
  EXPECT_EQ(r["params"]["sources"], 4);
  EXPECT_EQ(r["figures"]["sessions"], 200);
  EXPECT_EQ(r["figures"]["failed"], 0);

  const ToolRun v6 = run_tool(
      {TERN_BENCH_BINARY, "sessions", "[::1]:" + std::to_string(server.port()), "--sources", "4"});
  EXPECT_EQ(v6.status, 2) << v6.err;
  EXPECT_NE(v6.err.find("--sources 4 needs an IPv4 loopback target, not [::1]:"), std::string::npos)
      << v6.err;
}

// ---- ttcp (report 002) ----

TEST(TernBench, TtcpAgainstTernEchoAndInProcess) {
  TernEcho server("ttcp");
  ASSERT_GT(server.port(), 0);
  for (const char* client : {"fiber", "blocking"}) {
    const ToolRun run =
        bench({"ttcp", target(server.port()), "--client", client, "--count", "2000"});
    const Json r = report_of(run);
    expect_verified(run, r, "ttcp");
    EXPECT_EQ(r["params"]["client"], client);
    EXPECT_EQ(r["params"]["size_bytes"], 1000);
    EXPECT_EQ(r["figures"]["messages"], 2000);
    expect_positive(r["figures"], {"mib_per_s", "mb_per_s", "us_per_message", "rtt_p50_us",
                                   "rtt_p99_us", "rtt_max_us"});
  }
  for (const char* workers : {"1", "2"}) {
    const ToolRun run = bench({"ttcp", "--in-process", "--workers", workers, "--count", "1000",
                               "--repeat", "3", "--size", "100"});
    const Json r = report_of(run);
    expect_verified(run, r, "ttcp");
    EXPECT_EQ(r["target"], "tern");
    EXPECT_EQ(r["params"]["in_process"], true);
    EXPECT_EQ(r["figures"]["runs_mib_per_s"].size(), 3u);
    expect_positive(r["figures"], {"mib_per_s", "rtt_p50_us"});
  }
  const ToolRun run = bench({"ttcp", "--in-process", "--client", "blocking", "--count", "1000"});
  const Json r = report_of(run);
  expect_verified(run, r, "ttcp");
  EXPECT_EQ(r["target"], "blocking");
  EXPECT_EQ(r["params"]["io"], "blocking");
}

// The reports of a run that prints one verified JSON line per variant, checked for `mode`.
std::vector<Json> reports_of(const ToolRun& run, const std::string& mode) {
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  std::vector<Json> reports;
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {
    reports.push_back(Json::parse(line));
    EXPECT_EQ(reports.back()["mode"], mode) << line;
    EXPECT_EQ(reports.back()["verified"], true) << line;
  }
  return reports;
}

// ---- switch (report 004) ----

TEST(TernBench, SwitchPrintsOneVerifiedReportPerVariant) {
  std::vector<std::string> targets;
  for (const Json& r : reports_of(bench({"switch", "--switches", "200000"}), "switch")) {
    EXPECT_EQ(r["figures"]["switches"], 200000);
    EXPECT_EQ(r["figures"]["switches_a"], 100000);
    EXPECT_EQ(r["figures"]["switches_b"], 100000);
    expect_positive(r["figures"], {"ns_per_switch", "switches_per_s", "batch_p50_ns_per_switch"});
    // The batch spread is read from the batches' own values: ordered, the largest one the max.
    const Json& f = r["figures"];
    EXPECT_LE(f["batch_p50_ns_per_switch"].get<double>(),
              f["batch_p99_ns_per_switch"].get<double>());
    EXPECT_LE(f["batch_p99_ns_per_switch"].get<double>(),
              f["batch_max_ns_per_switch"].get<double>());
    targets.push_back(r["target"]);
  }
  EXPECT_EQ(targets, (std::vector<std::string>{"tern-fiber", "tern-context"}));
}

// ---- log (report 002) ----

TEST(TernBench, LogReportsTheMedianOfItsRoundsForEachLoggerAndThreadCount) {
  const ToolRun run = bench(
      {"log", "--calls", "3000", "--threads", "1,2", "--rounds", "3", "--buffer-bytes", "16384"});
  std::vector<std::string> seen;
  for (const Json& r : reports_of(run, "log")) {
    const std::string line = r.dump();
    EXPECT_EQ(r["figures"]["lines"], 3000) << line;
    // The reported run is the median of the three rounds by calls/s.
    const Json& rounds = r["figures"]["calls_per_s_rounds"];
    ASSERT_EQ(rounds.size(), 3u) << line;
    std::vector<double> sorted = rounds.get<std::vector<double>>();
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(r["figures"]["calls_per_s"].get<double>(), sorted[1]) << line;
    EXPECT_EQ(r["figures"].contains("calls_per_s_vs_spdlog"), r["target"] == "tern") << line;
    // The clock's resolution is measured and reported beside the latencies it quantizes.
    ASSERT_TRUE(r["figures"]["clock_step_ns"].is_number()) << line;
    EXPECT_GT(r["figures"]["clock_step_ns"].get<double>(), 0.0) << line;
    EXPECT_LE(r["figures"]["clock_step_ns"].get<double>(),
              r["figures"]["call_max_ns"].get<double>())
        << line;
    seen.push_back(r["target"].get<std::string>() + "/" + r["params"]["threads"].dump());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"tern/1", "spdlog/1", "tern/2", "spdlog/2"}));
}

// ---- runs that must fail ----

TEST(TernBench, MissingRepliesFailTheRun) {
  TernEcho server("discard");  // reads requests, never replies
  ASSERT_GT(server.port(), 0);
  const ToolRun run = bench(
      {"traffic", target(server.port()), "-S", "-t", "1", "--duration", "1", "--timeout", "0.3"});
  const Json r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false);
  EXPECT_GE(r["errors"].get<int>(), 1);
  ASSERT_FALSE(r["error_messages"].empty());
  EXPECT_NE(r["error_messages"][0].get<std::string>().find("reading reply 0"), std::string::npos)
      << r.dump();
}

TEST(TernBench, AFlippedByteFailsTrafficAndPingpong) {
  LocalServer flipper(100);
  ASSERT_GT(flipper.port(), 0);
  ToolRun run =
      bench({"traffic", target(flipper.port()), "-S", "-t", "1", "-s", "256", "--count", "50"});
  Json r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false);
  ASSERT_FALSE(r["error_messages"].empty());
  EXPECT_NE(r["error_messages"][0].get<std::string>().find("payload byte 84"), std::string::npos)
      << r.dump();

  run = bench({"pingpong", target(flipper.port()), "--block", "4096", "--duration", "0.5"});
  r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false);
  ASSERT_FALSE(r["error_messages"].empty());
  EXPECT_NE(r["error_messages"][0].get<std::string>().find("corrupt data at stream offset"),
            std::string::npos)
      << r.dump();
}

TEST(TernBench, DiscardRunsDetectDataTheServerNeverRead) {
  LocalServer stops_reading(-1, 1000);  // reads 1000 bytes, then closes with the rest unread
  ASSERT_GT(stops_reading.port(), 0);
  ToolRun run = bench({"traffic", target(stops_reading.port()), "-c", "2", "-S", "-t", "1",
                       "--count", "200", "--timeout", "2"});
  Json r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false) << r.dump();

  LocalServer echo(-1);  // answers discard requests: not a discard server
  ASSERT_GT(echo.port(), 0);
  run = bench({"traffic", target(echo.port()), "-c", "2", "-A", "-t", "1", "--duration", "1"});
  r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  ASSERT_FALSE(r["error_messages"].empty()) << r.dump();
  EXPECT_NE(r["error_messages"][0].get<std::string>().find("bytes back for discard requests"),
            std::string::npos)
      << r.dump();
}

TEST(TernBench, NoServerFailsWithConnectErrors) {
  int closed_port = 0;
  {
    LocalServer closed(-1);  // its listener is closed when it goes: nothing listens there
    closed_port = closed.port();
  }
  ASSERT_GT(closed_port, 0);
  const ToolRun run = bench({"sessions", target(closed_port), "--total", "5", "--in-flight", "2"});
  const Json r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false);
  EXPECT_EQ(r["figures"]["failed_connect"], 5) << r.dump();
}

TEST(TernBench, BadCommandLinesExitWith2AndSayWhy) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{}, "A subcommand is required"},
      {{"traffic", "-S", "-A"}, "excludes"},
      {{"traffic", "nohost"}, "target 'nohost': missing ':port'"},
      {{"sessions", "--total", "0"}, "--total must be at least 1 session"},
      {{"sessions", "--sources", "0"}, "--sources"},
      {{"pingpong", "--no-such-option"}, "--no-such-option"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.begin(), TERN_BENCH_BINARY);
    const ToolRun run = run_tool(args);
    EXPECT_EQ(run.status, 2) << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
  }
}

}  // namespace
}  // namespace tern::test
