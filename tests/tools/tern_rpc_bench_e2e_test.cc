// tern-bench rpc (report 001, docs/benchmark-methods.md) end to end: the real binary against
// tern-rpc-server (own connections, --shared, a --duration cap, the server's own count of the
// calls, streams that read nothing) and against an rpc server of the test's own that answers
// wrongly, under the backend named by TERN_IO; plus a closed port and bad command lines. Each run
// makes a few thousand calls at most.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmark_message.tern.h"
#include "rpc_message.h"
#include "tern/fiber/event.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/net/address.h"
#include "tern/rpc/server.h"
#include "tern_bench_process.h"
#include "tern_bench_report.h"
#include "tls/tls_test_util.h"

namespace tern::test {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

std::string target(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }

// tern-rpc-server on a kernel-chosen port, two workers, the backend under test.
class TernRpcServer : public ServerProcess {
 public:
  TernRpcServer()
      : ServerProcess(
            {TERN_RPC_SERVER_BINARY, "--port", "0", "--threads", "2", "--io", backend()}) {}
};

// Runs tern-bench rpc against `port` with `args`, the backend, --json and --quiet.
ToolRun rpc_bench(int port, std::vector<std::string> args) {
  args.insert(args.begin(), {TERN_BENCH_BINARY, "rpc", target(port)});
  args.insert(args.end(), {"--io", backend(), "--json", "--quiet"});
  return run_tool(std::move(args));
}

// What every verified run of `calls` calls reports.
void expect_verified_calls(const ToolRun& run, const Json& r, std::uint64_t calls) {
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_EQ(r["tool"], "tern-bench");
  EXPECT_EQ(r["mode"], "rpc");
  EXPECT_EQ(r["verified"], true) << r.dump();
  EXPECT_EQ(r["errors"], 0) << r.dump();
  EXPECT_EQ(r["params"]["message_bytes"], bench::kRpcRequestBytes);
  const Json& f = r["figures"];
  EXPECT_EQ(f["calls"], calls) << r.dump();
  for (const char* name : {"tps", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "min_us",
                           "max_us", "elapsed_s"}) {
    ASSERT_TRUE(f[name].is_number()) << name << " in " << r.dump();
    EXPECT_GT(f[name].get<double>(), 0) << name << " in " << r.dump();
  }
  EXPECT_LE(f["min_us"].get<double>(), f["p50_us"].get<double>());
  EXPECT_LE(f["p50_us"].get<double>(), f["p99_us"].get<double>());
  EXPECT_LE(f["p99_us"].get<double>(), f["max_us"].get<double>());
  // TPS is the verified calls over the run's seconds.
  EXPECT_NEAR(f["tps"].get<double>(), static_cast<double>(calls) / f["elapsed_s"].get<double>(),
              0.01 * f["tps"].get<double>() + 1);
}

TEST(TernRpcBench, EachClientWithItsOwnConnection) {
  TernRpcServer server;
  ASSERT_GT(server.port(), 0) << server.first_line();
  EXPECT_NE(server.first_line().find("tern-rpc-server: listening on 127.0.0.1:"), std::string::npos)
      << server.first_line();
  const ToolRun run = rpc_bench(
      server.port(), {"-c", "20", "-n", "2000", "--server-pid", std::to_string(server.pid())});
  const Json r = report_of(run);
  expect_verified_calls(run, r, 2000);
  EXPECT_EQ(r["target"], "tern");
  EXPECT_EQ(r["params"]["concurrency"], 20);
  EXPECT_EQ(r["params"]["calls"], 2000);
  EXPECT_EQ(r["params"]["shared"], 0);
  EXPECT_EQ(r["params"]["target_address"], target(server.port()));
  if (backend() != "auto") {
    EXPECT_EQ(r["params"]["io"], backend());
  }
  EXPECT_TRUE(r["server_cpu_pct"].is_number()) << r.dump();
  EXPECT_TRUE(r["notes"].empty()) << r.dump();
}

TEST(TernRpcBench, ClientsSharingTwoConnections) {
  TernRpcServer server;
  ASSERT_GT(server.port(), 0) << server.first_line();
  const ToolRun run =
      rpc_bench(server.port(), {"-c", "20", "-n", "2000", "--shared", "2", "--workers", "2"});
  const Json r = report_of(run);
  expect_verified_calls(run, r, 2000);
  EXPECT_EQ(r["params"]["shared"], 2);
  EXPECT_EQ(r["params"]["workers"], 2);
}

TEST(TernRpcBench, TheServerAnswersEveryCallAndStopsCleanly) {
  // -n 1000 over -c 7: the remainder is spread, and the server counts exactly 1000 calls.
  ServerProcess server(
      {TERN_RPC_SERVER_BINARY, "--port", "0", "--threads", "1", "--io", backend()});
  ASSERT_GT(server.port(), 0) << server.first_line();
  const ToolRun run = rpc_bench(server.port(), {"-c", "7", "-n", "1000"});
  const Json r = report_of(run);
  expect_verified_calls(run, r, 1000);
  EXPECT_EQ(server.stop(), 0) << server.last_line();
  EXPECT_NE(server.last_line().find("stopped; 1000 calls served (0 failed, 0 rejected)"),
            std::string::npos)
      << server.last_line();
}

TEST(TernRpcBench, ADurationCapEndsTheRunEarly) {
  TernRpcServer server;
  ASSERT_GT(server.port(), 0) << server.first_line();
  const ToolRun run = rpc_bench(server.port(), {"-c", "4", "-n", "100000000", "--duration", "0.3"});
  const Json r = report_of(run);
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_EQ(r["verified"], true) << r.dump();
  EXPECT_GT(r["figures"]["calls"].get<std::uint64_t>(), 0u);
  EXPECT_LT(r["figures"]["calls"].get<std::uint64_t>(), 100000000u);
  EXPECT_LT(r["figures"]["elapsed_s"].get<double>(), 5.0);
  ASSERT_EQ(r["notes"].size(), 1u) << r.dump();
  EXPECT_NE(r["notes"][0].get<std::string>().find("--duration cap"), std::string::npos);
}

TEST(TernRpcBench, OverTlsWithTheServerVerified) {
  const tern_tls_test::Certs& certs = tern_tls_test::Certs::get();
  ASSERT_TRUE(certs.ok);
  ServerProcess server({TERN_RPC_SERVER_BINARY, "--port", "0", "--threads", "1", "--io", backend(),
                        "--tls-cert", certs.crt("server"), "--tls-key", certs.key("server")});
  ASSERT_GT(server.port(), 0) << server.first_line();
  EXPECT_NE(server.first_line().find("(TLS, 1 workers"), std::string::npos) << server.first_line();
  // The certificate names 127.0.0.1, the target's host, and chains to the test CA.
  const ToolRun run =
      rpc_bench(server.port(), {"-c", "10", "-n", "1000", "--tls", "--tls-ca", certs.ca()});
  const Json r = report_of(run);
  expect_verified_calls(run, r, 1000);
  EXPECT_EQ(r["params"]["tls"], true);
  // A plaintext client of the TLS server fails; the server goes on and stops cleanly.
  const ToolRun plain = rpc_bench(server.port(), {"-c", "2", "-n", "4", "--timeout", "2"});
  EXPECT_NE(plain.status, 0) << plain.out;
  EXPECT_EQ(server.stop(), 0) << server.last_line();
  EXPECT_NE(server.last_line().find("stopped; 1000 calls served (0 failed, 0 rejected)"),
            std::string::npos)
      << server.last_line();
}

// BenchmarkService answering field2 = 99: every reply fails tern-bench's check.
class WrongService final : public bench::BenchmarkServiceBase {
 public:
  rpc::Status Say(rpc::ServerContext&, const bench::BenchmarkMessage& request,
                  bench::BenchmarkMessage& reply) override {
    reply = request;
    bench::answer_rpc_request(reply);
    reply.set_field2(99);
    return {};
  }
};

// A tern::rpc server with WrongService on a runtime of its own thread, until destroyed.
class WrongServer {
 public:
  WrongServer() {
    std::promise<int> port;
    std::future<int> bound = port.get_future();
    thread_ = std::thread([this, &port] { serve(port); });
    port_ = bound.get();
  }
  ~WrongServer() {
    stop_.set();
    thread_.join();
  }
  WrongServer(const WrongServer&) = delete;
  WrongServer& operator=(const WrongServer&) = delete;
  int port() const { return port_; }

 private:
  void serve(std::promise<int>& port) {
    const Result<io::BackendChoice> choice = io::parse_backend(backend());
    Runtime runtime({.workers = 1,
                     .make_parker = io::reactors(choice ? *choice : io::BackendChoice::automatic)});
    runtime.run([&] {
      WrongService service;
      rpc::Server server;
      (void)server.add_service(service);
      const Result<net::Address> address = server.start(net::Address::loopback(0));
      port.set_value(address ? address->port() : 0);
      if (!address) return;
      (void)stop_.wait();
      server.stop(deadline_after(1s));
    });
  }

  Event stop_;
  std::thread thread_;
  int port_ = 0;
};

TEST(TernRpcBench, WrongRepliesFailTheRun) {
  WrongServer server;
  ASSERT_GT(server.port(), 0);
  const ToolRun run = rpc_bench(server.port(), {"-c", "3", "-n", "30"});
  const Json r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false);
  EXPECT_EQ(r["errors"], 30) << r.dump();
  EXPECT_EQ(r["figures"]["calls"], 0) << r.dump();
  ASSERT_EQ(r["error_messages"].size(), 1u) << "one distinct failure: " << r.dump();
  EXPECT_NE(r["error_messages"][0].get<std::string>().find("reply field2 is 99, not 100"),
            std::string::npos)
      << r.dump();
}

TEST(TernRpcBench, AClosedPortFailsEveryCall) {
  int closed_port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
    closed_port = ntohs(address.sin_port);
    ::close(fd);  // bound, never listened: connects are refused
  }
  const ToolRun run = rpc_bench(closed_port, {"-c", "4", "-n", "40", "--timeout", "0.5"});
  const Json r = report_of(run);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(r["verified"], false);
  EXPECT_EQ(r["errors"], 40) << r.dump();
  EXPECT_EQ(r["figures"]["calls"], 0);
  ASSERT_FALSE(r["error_messages"].empty()) << r.dump();
  EXPECT_NE(r["error_messages"][0].get<std::string>().find("unavailable"), std::string::npos)
      << r.dump();
  ASSERT_EQ(r["notes"].size(), 1u) << r.dump();
  EXPECT_NE(r["notes"][0].get<std::string>().find("4 of 4 channel(s) had no connection"),
            std::string::npos)
      << r.dump();
}

TEST(TernRpcBench, StreamsThatReadNothingHoldOneWindowEach) {
  TernRpcServer server;
  ASSERT_GT(server.port(), 0) << server.first_line();
  const ToolRun run = rpc_bench(
      server.port(), {"--stream", "--stall", "0.2", "--shared", "1", "-c", "4", "--stream-window",
                      "65536", "--server-pid", std::to_string(server.pid())});
  const Json r = report_of(run);
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_EQ(r["verified"], true) << r.dump();
  EXPECT_EQ(r["errors"], 0) << r.dump();
  EXPECT_EQ(r["params"]["stream_window"], 65536);
  const Json& f = r["figures"];
  EXPECT_EQ(f["streams"], 4);
  EXPECT_EQ(f["all_full"], true) << r.dump();
  EXPECT_EQ(f["within_window"], true) << r.dump();
  EXPECT_EQ(f["failed_streams"], 0);
  // Every stream holds one window of answers (the server's writer parked), never more than one
  // answer past it, and the client wrote nothing once the streams were full.
  const auto answer = f["answer_bytes"].get<std::uint64_t>();
  EXPECT_GE(f["peak_buffered_bytes_max"].get<std::uint64_t>(), 65536u);
  EXPECT_LE(f["peak_buffered_bytes_max"].get<std::uint64_t>(), 65536u + answer);
  EXPECT_GE(f["answers_before_park_min"].get<std::uint64_t>() * answer, 65536u);
  EXPECT_EQ(f["messages_sent_after_full"], 0) << r.dump();
  // The server stopped reading each stream within its own window (256 KiB) plus the message
  // its handler holds.
  EXPECT_GT(f["unanswered_bytes_max"].get<std::uint64_t>(), 0u);
  EXPECT_LE(f["unanswered_bytes_max"].get<std::uint64_t>(),
            (256u << 10) + 2 * bench::kRpcRequestBytes);
  EXPECT_TRUE(f["server_rss_before_kib"].is_number()) << r.dump();
  EXPECT_TRUE(f["server_rss_after_full_kib"].is_number()) << r.dump();
}

TEST(TernRpcBench, BadCommandLinesExitWith2AndSayWhy) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{TERN_BENCH_BINARY, "rpc", "-c", "10", "-n", "5"}, "-n 5 is less than -c 10"},
      {{TERN_BENCH_BINARY, "rpc", "-c", "0"}, "-c/--concurrency must be at least 1"},
      {{TERN_BENCH_BINARY, "rpc", "-c", "10", "--shared", "11"}, "--shared 11: at most -c"},
      {{TERN_BENCH_BINARY, "rpc", "-c", "10", "--shared", "1", "--workers", "2"},
       "each worker needs a channel"},
      {{TERN_BENCH_BINARY, "rpc", "--timeout", "0"}, "--timeout 0"},
      {{TERN_BENCH_BINARY, "rpc", "nohost"}, "target 'nohost'"},
      {{TERN_RPC_SERVER_BINARY, "--io", "kqueue"}, "--io"},
      {{TERN_RPC_SERVER_BINARY, "--port", "70000"}, "--port"},
      {{TERN_BENCH_BINARY, "rpc", "--tls-ca", "ca.crt"}, "--tls-ca needs --tls"},
      {{TERN_BENCH_BINARY, "rpc", "--stall", "1"}, "--stall needs --stream"},
      {{TERN_BENCH_BINARY, "rpc", "--stream", "--stall", "10"}, "shorter than --timeout"},
      {{TERN_BENCH_BINARY, "rpc", "--stream-window", "1000"}, "--stream-window: at least"},
      {{TERN_RPC_SERVER_BINARY, "--tls-cert", "a.crt"}, "--tls-cert and --tls-key go together"},
      {{TERN_RPC_SERVER_BINARY, "--tls-ca", "ca.crt"}, "--tls-ca: client certificates need TLS"},
  };
  for (const Case& c : cases) {
    const ToolRun run = run_tool(c.args);
    EXPECT_EQ(run.status, 2) << c.args[1] << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
  }
  const ToolRun help = run_tool({TERN_RPC_SERVER_BINARY, "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--threads"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace tern::test
