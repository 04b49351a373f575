// tern-bench soak end to end: each scenario run small and short by the real binary against a real
// tern-echo or tern-rpc-server child process (port 0, its admin endpoint on port 0 too), under the
// backend named by TERN_IO; the JSON report's fields are checked, and so are a run the server
// breaks (--idle-timeout during an idle hold) and bad command lines. Plus the pure helpers the
// soak sums up with (soak_stats.h). Counts are scaled down under ThreadSanitizer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "soak/soak_stats.h"
#include "tern_bench_process.h"
#include "tern_bench_report.h"
#include "test_scale.h"

namespace tern::test {
namespace {

using Json = nlohmann::json;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::string count(int n) { return std::to_string(tern_test::scaled(n)); }

// A server whose first line names its port and, after "admin ", its admin endpoint's.
class AdminServerProcess : public ServerProcess {
 public:
  explicit AdminServerProcess(std::vector<std::string> args) : ServerProcess(std::move(args)) {
    const std::size_t at = first_line().find("admin 127.0.0.1:");
    if (at != std::string::npos) admin_port_ = std::atoi(first_line().c_str() + at + 16);
  }
  std::string target() const { return "tcp://127.0.0.1:" + std::to_string(port()); }
  std::string admin() const { return "127.0.0.1:" + std::to_string(admin_port_); }
  int admin_port() const { return admin_port_; }

 private:
  int admin_port_ = 0;
};

// tern-echo (echo mode, one worker, the backend under test) with its admin endpoint and `extra`.
AdminServerProcess tern_echo(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {TERN_ECHO_BINARY, "--port",  "0",       "--threads",  "1",
                                   "--io",           backend(), "--admin", "127.0.0.1:0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return AdminServerProcess(std::move(args));
}

// Runs `tern-bench soak --scenario S` against `server` with its pid and admin endpoint, the
// backend, --json and --quiet, plus `args`.
ToolRun soak(const std::string& scenario, const AdminServerProcess& server,
             std::vector<std::string> args) {
  args.insert(args.begin(), {TERN_BENCH_BINARY, "soak", server.target(), "--scenario", scenario,
                             "--server-pid", std::to_string(server.pid()), "--admin",
                             server.admin(), "--io", backend(), "--json", "--quiet"});
  return run_tool(std::move(args), std::chrono::seconds(120));
}

double number(const Json& figures, const char* name) {
  EXPECT_TRUE(figures.contains(name) && figures[name].is_number())
      << name << " in " << figures.dump();
  return figures.contains(name) && figures[name].is_number() ? figures[name].get<double>() : -1;
}

// What every clean soak run reports: no error, the server sampled, fibers and timers back.
void expect_clean(const ToolRun& run, const Json& r, const std::string& scenario) {
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_EQ(r["tool"], "tern-bench");
  EXPECT_EQ(r["mode"], "soak");
  EXPECT_EQ(r["params"]["scenario"], scenario);
  EXPECT_EQ(r["verified"], true) << r.dump();
  EXPECT_EQ(r["errors"], 0) << r.dump();
  const Json& f = r["figures"];
  EXPECT_TRUE(f["errors_by_kind"].empty()) << r.dump();
  EXPECT_GE(number(f, "samples"), 2) << r.dump();
  EXPECT_GT(number(f, "server_rss_max_kib"), 0);
  EXPECT_GT(number(f, "server_fds_max"), 0);
  EXPECT_EQ(f["back_to_baseline"], true) << r.dump();
  EXPECT_GE(number(f, "server_fibers_before"), 1);
  EXPECT_LE(number(f, "server_fibers_after"), number(f, "server_fibers_before"));
  EXPECT_GE(number(f, "server_timers_before"), 0);
  EXPECT_LE(number(f, "server_timers_after"), number(f, "server_timers_before"));
  EXPECT_TRUE(r["server_cpu_pct"].is_number()) << r.dump();
}

TEST(TernSoak, EchoConnectionsRoundTripWithoutErrorsAndTheServerSettles) {
  AdminServerProcess server = tern_echo();
  ASSERT_GT(server.port(), 0) << server.first_line();
  ASSERT_GT(server.admin_port(), 0) << server.first_line();
  const int connections = tern_test::scaled(2000);
  const ToolRun run =
      soak("echo", server,
           {"-c", std::to_string(connections), "--duration", "3", "--warmup", "1", "--think", "1"});
  const Json r = report_of(run);
  expect_clean(run, r, "echo");
  const Json& f = r["figures"];
  EXPECT_EQ(f["connections_open"], connections) << r.dump();
  EXPECT_GT(number(f, "round_trips"), connections) << "every connection did round trips";
  EXPECT_EQ(number(f, "bytes_echoed"), number(f, "round_trips") * 64);
  EXPECT_GT(number(f, "round_trips_per_s"), 0);
  EXPECT_LE(number(f, "rtt_p50_us"), number(f, "rtt_max_us"));
  // Samples at 1 s and 2 s of the load (after a 1 s warm-up) at least: a trend.
  EXPECT_GE(number(f, "trend_samples"), 2) << r.dump();
  EXPECT_TRUE(f["rss_slope_kib_per_s"].is_number()) << r.dump();
  EXPECT_TRUE(f["fds_slope_per_s"].is_number()) << r.dump();
  EXPECT_GE(number(f, "server_fds_max"), connections) << "the server held them all at once";
}

TEST(TernSoak, RpcCallersAllSucceed) {
  AdminServerProcess server({TERN_RPC_SERVER_BINARY, "--port", "0", "--threads", "1", "--io",
                             backend(), "--admin", "127.0.0.1:0"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  ASSERT_GT(server.admin_port(), 0) << server.first_line();
  const int callers = tern_test::scaled(100);
  const ToolRun run =
      soak("rpc", server, {"-c", std::to_string(callers), "--duration", "2", "--warmup", "0.5"});
  const Json r = report_of(run);
  expect_clean(run, r, "rpc");
  const Json& f = r["figures"];
  EXPECT_EQ(f["channels"], callers);
  EXPECT_EQ(f["channels_open"], callers) << r.dump();
  EXPECT_GT(number(f, "calls"), callers);
  EXPECT_GT(number(f, "calls_per_s"), 0);
  EXPECT_LE(number(f, "call_p50_us"), number(f, "call_p99_us"));
}

TEST(TernSoak, IdleConnectionsCostTheServerLittleAndStayOpen) {
  AdminServerProcess server = tern_echo();
  ASSERT_GT(server.port(), 0) << server.first_line();
  const int connections = tern_test::scaled(1000);
  std::vector<std::string> args = {"-c", std::to_string(connections), "--hold", "1"};
  if (!kSanitized) args.insert(args.end(), {"--max-idle-bytes", "8192"});
  const ToolRun run = soak("idle", server, args);
  const Json r = report_of(run);
  expect_clean(run, r, "idle");
  const Json& f = r["figures"];
  EXPECT_EQ(f["connections_open"], connections) << r.dump();
  EXPECT_EQ(f["verified_after_hold"], connections) << "each answered after the hold";
  EXPECT_GE(number(f, "server_fds_after") - number(f, "server_fds_before"), connections - 1);
  const double per_connection = number(f, "rss_per_idle_connection_bytes");
  EXPECT_GT(per_connection, 0) << r.dump();
  if (!kSanitized) {
    EXPECT_LE(per_connection, 8192) << r.dump();
  }
}

TEST(TernSoak, AConnectFloodPastMaxConnectionsLeavesTheClientsAlone) {
  const int clients = 10;
  AdminServerProcess server = tern_echo({"--max-connections", "40"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  const std::string attempts = count(1000);
  const ToolRun run = soak("flood", server,
                           {"-c", std::to_string(clients), "--flood-connects", attempts,
                            "--flood-seconds", "1", "--warmup", "0.5"});
  const Json r = report_of(run);
  expect_clean(run, r, "flood");
  const Json& f = r["figures"];
  EXPECT_EQ(f["clients_open"], clients);
  EXPECT_EQ(f["flood_attempts"], std::stoi(attempts));
  const double turned_away = number(f, "flood_closed_at_once") + number(f, "flood_reset_at_once") +
                             number(f, "flood_connect_failed");
  EXPECT_GT(turned_away, 0) << r.dump();
  // At most 40 connections at once: the clients, the admitted flood connections held open, and
  // the admin endpoint's are on another listener.
  EXPECT_LE(number(f, "flood_admitted"), 40 - clients) << r.dump();
  EXPECT_EQ(turned_away + number(f, "flood_admitted"), std::stoi(attempts)) << r.dump();
  EXPECT_GT(number(f, "server_rejected"), 0) << r.dump();
  for (const char* window : {"before", "during", "after"}) {
    const std::string name = std::string(window) + "_round_trips";
    EXPECT_GT(number(f, name.c_str()), 0) << r.dump();
    for (const char* figure : {"_p50_us", "_p99_us", "_max_us"}) {
      const std::string latency = std::string(window) + figure;
      EXPECT_GT(number(f, latency.c_str()), 0) << r.dump();
    }
  }
}

TEST(TernSoak, AServerThatClosesIdleConnectionsFailsTheIdleRun) {
  AdminServerProcess server = tern_echo({"--idle-timeout", "200"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  const int connections = tern_test::scaled(50);
  const ToolRun run = soak("idle", server, {"-c", std::to_string(connections), "--hold", "1"});
  const Json r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false);
  EXPECT_EQ(r["errors"], connections) << r.dump();
  EXPECT_EQ(r["figures"]["errors_by_kind"]["the server closed an idle connection"], connections)
      << r.dump();
  ASSERT_FALSE(r["error_messages"].empty());
  EXPECT_NE(r["error_messages"][0].get<std::string>().find("after the hold"), std::string::npos);
  EXPECT_EQ(r["figures"]["back_to_baseline"], true) << r.dump();
}

TEST(TernSoak, BadCommandLinesExitWith2AndSayWhy) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{TERN_BENCH_BINARY, "soak", "--scenario", "storm"}, "--scenario"},
      {{TERN_BENCH_BINARY, "soak", "--scenario", "idle", "--duration", "5"}, "--duration applies"},
      {{TERN_BENCH_BINARY, "soak", "--shared", "2"}, "--shared applies to the rpc scenario"},
      {{TERN_BENCH_BINARY, "soak", "--think", "5", "--scenario", "rpc"}, "--think applies"},
      {{TERN_BENCH_BINARY, "soak", "--admin", "nohost"}, "--admin nohost"},
      {{TERN_BENCH_BINARY, "soak", "--scenario", "idle", "--max-idle-bytes", "8192"},
       "--max-idle-bytes needs --server-pid"},
      {{TERN_ECHO_BINARY, "--admin", "nohost"}, "--admin nohost"},
      {{TERN_RPC_SERVER_BINARY, "--admin", "nohost"}, "--admin nohost"},
  };
  for (const Case& c : cases) {
    const ToolRun run = run_tool(c.args);
    EXPECT_EQ(run.status, 2) << c.args[1] << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
  }
}

TEST(SoakStats, LeastSquaresSlope) {
  const std::vector<std::pair<double, double>> line = {{0, 10}, {1, 12}, {2, 14}, {3, 16}};
  EXPECT_DOUBLE_EQ(*bench::least_squares_slope(line), 2.0);
  const std::vector<std::pair<double, double>> flat = {{5, 7}, {6, 7}, {9, 7}};
  EXPECT_DOUBLE_EQ(*bench::least_squares_slope(flat), 0.0);
  // Noise around a slope of -1: the fit, not the end points.
  const std::vector<std::pair<double, double>> noisy = {{0, 1}, {1, -1}, {2, -1}, {3, -4}};
  EXPECT_NEAR(*bench::least_squares_slope(noisy), -1.5, 1e-12);
  EXPECT_FALSE(bench::least_squares_slope(std::vector<std::pair<double, double>>{{1, 1}}));
  EXPECT_FALSE(bench::least_squares_slope(std::vector<std::pair<double, double>>{{1, 1}, {1, 2}}));
}

TEST(SoakStats, PrometheusSumAddsEverySeriesOfOneName) {
  const std::string page =
      "# HELP tern_fibers_alive Fibers\n"
      "# TYPE tern_fibers_alive gauge\n"
      "tern_fibers_alive{worker=\"0\"} 4\n"
      "tern_fibers_alive{worker=\"1\"} 1.5\n"
      "tern_fibers_alive_max 99\n"
      "tern_timers_pending 0 1700000000000\n"
      "tern_label{path=\"a} b\"} 2\n"
      "tern_bad{worker=\"0\"} x\n";
  EXPECT_DOUBLE_EQ(*bench::prometheus_sum(page, "tern_fibers_alive"), 5.5);
  EXPECT_DOUBLE_EQ(*bench::prometheus_sum(page, "tern_fibers_alive_max"), 99);
  EXPECT_DOUBLE_EQ(*bench::prometheus_sum(page, "tern_timers_pending"), 0);
  EXPECT_DOUBLE_EQ(*bench::prometheus_sum(page, "tern_label"), 2);
  EXPECT_FALSE(bench::prometheus_sum(page, "tern_fibers"));
  EXPECT_FALSE(bench::prometheus_sum(page, "tern_bad"));
}

TEST(SoakStats, VmRssAndHttpBodies) {
  EXPECT_EQ(*bench::parse_vm_rss_kib("Name:\ttern-echo\nVmPeak:\t 9 kB\nVmRSS:\t   45676 kB\n"),
            45676u);
  EXPECT_FALSE(bench::parse_vm_rss_kib("Name:\tkthreadd\n"));
  EXPECT_FALSE(bench::parse_vm_rss_kib("VmRSS:\t12 MB\n"));
  const Result<std::uint64_t> own = bench::read_rss_kib(::getpid());
  ASSERT_TRUE(own);
  EXPECT_GT(*own, 0u);
  const Result<std::uint64_t> fds = bench::count_open_fds(::getpid());
  ASSERT_TRUE(fds);
  EXPECT_GE(*fds, 3u);

  std::string why;
  const Result<std::string_view> body =
      bench::http_ok_body("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", &why);
  ASSERT_TRUE(body) << why;
  EXPECT_EQ(*body, "ok");
  EXPECT_FALSE(bench::http_ok_body("HTTP/1.1 404 Not Found\r\n\r\n", &why));
  EXPECT_NE(why.find("404"), std::string::npos);
  EXPECT_FALSE(bench::http_ok_body("SSH-2.0\r\n\r\n", &why));
  EXPECT_FALSE(bench::http_ok_body("HTTP/1.1 200 OK\r\nHost: x\r\n", &why));
}

}  // namespace
}  // namespace tern::test
