// Units of tern-bench (tools/tern-bench, the tern_bench_core library): target parsing, option
// checks, the 16-byte-header frames, the report's JSON, latency figures, /proc CPU parsing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/frame.h"
#include "core/latency.h"
#include "core/options.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/target.h"
#include "core/tcp_counters.h"

namespace tern::bench {
namespace {

// ---- targets ----

TEST(TernBenchTarget, ParsesEveryAcceptedForm) {
  struct Case {
    const char* text;
    const char* host;
    std::uint16_t port;
    const char* canonical;
  };
  const Case cases[] = {
      {"tcp://127.0.0.1:7000", "127.0.0.1", 7000, "tcp://127.0.0.1:7000"},
      {"127.0.0.1:80", "127.0.0.1", 80, "tcp://127.0.0.1:80"},
      {"[::1]:7000", "::1", 7000, "tcp://[::1]:7000"},
      {"tcp://[fe80::1]:9", "fe80::1", 9, "tcp://[fe80::1]:9"},
      {"localhost:65535", "localhost", 65535, "tcp://localhost:65535"},
      {"tcp://echo-1.example.org:1", "echo-1.example.org", 1, "tcp://echo-1.example.org:1"},
  };
  for (const Case& c : cases) {
    std::string why;
    Result<Target> target = parse_target(c.text, &why);
    ASSERT_TRUE(target) << c.text << ": " << why;
    EXPECT_EQ(target->host, c.host) << c.text;
    EXPECT_EQ(target->port, c.port) << c.text;
    EXPECT_EQ(target->to_string(), c.canonical) << c.text;
  }
}

TEST(TernBenchTarget, RejectsBadInputsSayingWhy) {
  struct Case {
    const char* text;
    const char* message;  // a part of the error text
  };
  const Case cases[] = {
      {"", "empty target: expected tcp://host:port"},
      {"udp://1.2.3.4:5", "unsupported scheme 'udp://' (only tcp:// is supported)"},
      {"localhost", "'localhost': missing ':port'"},
      {"tcp://127.0.0.1", "missing ':port'"},
      {":80", "missing host before ':'"},
      {"::1:80", "an IPv6 address needs brackets, as in [::1]:7000"},
      {"[::1", "'[' without a closing ']'"},
      {"[::1]80", "expected ':port' after ']'"},
      {"[]:80", "empty IPv6 address in []"},
      {"[zz]:80", "'zz' is not an IPv6 address"},
      {"1.2.3.4:0", "port '0' is not a number from 1 to 65535"},
      {"1.2.3.4:65536", "port '65536' is not a number from 1 to 65535"},
      {"1.2.3.4:http", "port 'http' is not a number"},
      {"1.2.3.4:", "port '' is not a number"},
      {"tcp://1.2.3.4:80/path", "port '80/path' is not a number"},
      {"300.1.1.1:80", "'300.1.1.1' is not an IPv4 address"},
      {"a b:80", "'a b' is not a valid host name"},
  };
  for (const Case& c : cases) {
    std::string why;
    Result<Target> target = parse_target(c.text, &why);
    ASSERT_FALSE(target) << c.text;
    EXPECT_EQ(target.error(), std::errc::invalid_argument);
    EXPECT_NE(why.find(c.message), std::string::npos) << c.text << " gave: " << why;
  }
}

TEST(TernBenchTarget, ResolvesNumericHostsAndNames) {
  std::string why;
  Result<net::Address> v4 = resolve_target({"127.0.0.1", 7000}, &why);
  ASSERT_TRUE(v4) << why;
  EXPECT_EQ(*v4, net::Address::loopback(7000));
  Result<net::Address> v6 = resolve_target({"::1", 7001}, &why);
  ASSERT_TRUE(v6) << why;
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_EQ(v6->port(), 7001);
  Result<net::Address> name = resolve_target({"localhost", 7002}, &why);
  ASSERT_TRUE(name) << why;
  EXPECT_EQ(name->port(), 7002);
}

// ---- options ----

// Parses `args` after the program name with one mode's options registered; returns the parse
// error's text, or "" when the command line was accepted.
template <typename Options>
std::string parse(std::vector<std::string> args, Options& options,
                  CLI::App* (*add)(CLI::App&, Options&)) {
  CLI::App app{"test"};
  app.require_subcommand(1);
  add(app, options);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return std::string(e.what()).empty() ? e.get_name() : e.what();
  }
  return {};
}

TEST(TernBenchOptions, TrafficDefaultsAndBounds) {
  TrafficOptions o;
  ASSERT_EQ(parse({"traffic", "-t", "3"}, o, &add_traffic_options), "");
  EXPECT_TRUE(o.sync);
  EXPECT_EQ(o.connections, 3u);
  EXPECT_EQ(o.payload_bytes, 1024u);
  EXPECT_EQ(o.cmd, 1u);
  EXPECT_EQ(o.net.duration_s, 10);
  EXPECT_EQ(o.net.workers, std::min<std::size_t>(3, usable_cpu_count()));
  EXPECT_EQ(o.net.target.to_string(), "tcp://127.0.0.1:7000");
  EXPECT_EQ(o.net.name, "tern");

  TrafficOptions counted;
  ASSERT_EQ(parse({"traffic", "-A", "--count", "500", "[::1]:9000", "--name", "asio"}, counted,
                  &add_traffic_options),
            "");
  EXPECT_FALSE(counted.sync);
  EXPECT_EQ(counted.net.duration_s, 0) << "a count bound alone means no time bound";
  EXPECT_EQ(counted.net.target.host, "::1");
  EXPECT_EQ(counted.net.name, "asio");

  TrafficOptions with_pid;
  EXPECT_EQ(parse({"traffic", "--server-pid", std::to_string(::getpid())}, with_pid,
                  &add_traffic_options),
            "");
}

TEST(TernBenchOptions, RejectsBadCommandLinesSayingWhy) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> traffic = {
      {{"traffic", "-S", "-A"}, "excludes"},
      {{"traffic", "-s", "0"}, "-s/--size 0: payload bytes must be from 1 to"},
      {{"traffic", "-s", "100000000"}, "payload bytes must be from 1 to"},
      {{"traffic", "-t", "0"}, "-t/--threads must be at least 1 connection"},
      {{"traffic", "-c", "3"}, "-c/--cmd 3: expected 1 (echo) or 2 (discard)"},
      {{"traffic", "-S", "--window", "4"}, "--window applies to -A"},
      {{"traffic", "-A", "--window", "4", "-c", "2"}, "--window needs replies"},
      {{"traffic", "--duration", "0"}, "--duration 0 needs --count"},
      {{"traffic", "--interval", "0"}, "--interval 0: must be more than 0 seconds"},
      {{"traffic", "--io", "kqueue"}, "kqueue"},
      {{"traffic", "localhost"}, "target 'localhost': missing ':port'"},
      {{"traffic", "--target", "1.2.3.4:99999"}, "port '99999' is not a number"},
      {{"traffic", "--name", "a b"}, "--name 'a b': use letters"},
      {{"traffic", "--server-pid", "1073741823"}, "--server-pid 1073741823: no such process"},
      {{"traffic", "--workers", "5000"}, "--workers 5000: at most 1024"},
  };
  for (const Case& c : traffic) {
    TrafficOptions o;
    const std::string error = parse(c.args, o, &add_traffic_options);
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.args.back() << ": got '" << error << "'";
  }
  const std::vector<Case> sessions = {
      {{"sessions", "--total", "0"}, "--total must be at least 1 session"},
      {{"sessions", "--in-flight", "0"}, "--in-flight must be at least 1 session"},
      {{"sessions", "--messages", "0"}, "--messages must be at least 1 message"},
      {{"sessions", "--size", "0"}, "--size 0: payload bytes must be from 1"},
      {{"sessions", "--duration", "0"}, "--duration must be more than 0 seconds for sessions"},
  };
  for (const Case& c : sessions) {
    SessionsOptions o;
    const std::string error = parse(c.args, o, &add_sessions_options);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.args[1] << ": got '" << error << "'";
  }
  const std::vector<Case> pingpong = {
      {{"pingpong", "--sessions", "0"}, "--sessions must be at least 1 session"},
      {{"pingpong", "--block", "0"}, "--block 0: payload bytes must be from 1"},
      {{"pingpong", "--duration", "0"}, "--duration must be more than 0 seconds for pingpong"},
      {{"pingpong", "--idle-poll", "200"}, "--idle-poll 200: expected a duration of at most 1s"},
      {{"pingpong", "--idle-poll", "2s"}, "--idle-poll 2s: expected a duration of at most 1s"},
  };
  for (const Case& c : pingpong) {
    PingpongOptions o;
    const std::string error = parse(c.args, o, &add_pingpong_options);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.args[1] << ": got '" << error << "'";
  }
  const std::vector<Case> ttcp = {
      {{"ttcp", "--count", "0"}, "--count must be at least 1 message"},
      {{"ttcp", "--client", "thread"}, "thread"},
      {{"ttcp", "--placement", "split"}, "--placement applies to --in-process runs only"},
      {{"ttcp", "--workers", "2"}, "--workers 2: ttcp uses 1, or 2 with --in-process"},
      {{"ttcp", "--client", "blocking", "--in-process", "--workers", "2"},
       "--workers applies to --client fiber"},
  };
  for (const Case& c : ttcp) {
    TtcpOptions o;
    const std::string error = parse(c.args, o, &add_ttcp_options);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.args[1] << ": got '" << error << "'";
  }
  SwitchOptions s;
  EXPECT_NE(parse({"switch", "--switches", "1"}, s, &add_switch_options).find("at least 2"),
            std::string::npos);
}

TEST(TernBenchOptions, ModeDefaultsFollowTheReports) {
  SessionsOptions sessions;
  ASSERT_EQ(parse({"sessions"}, sessions, &add_sessions_options), "");
  EXPECT_EQ(sessions.total, 50000u);
  EXPECT_EQ(sessions.in_flight, 100u);
  EXPECT_EQ(sessions.messages, 3u);
  EXPECT_EQ(sessions.size_bytes, 8u);
  EXPECT_EQ(sessions.net.workers, 1u);
  PingpongOptions pingpong;
  ASSERT_EQ(parse({"pingpong", "--threads", "2"}, pingpong, &add_pingpong_options), "");
  EXPECT_EQ(pingpong.block_bytes, 16384u);
  EXPECT_EQ(pingpong.net.workers, 2u) << "--threads is the client's worker count";
  EXPECT_FALSE(pingpong.net.idle_poll) << "no --idle-poll: TERN_IDLE_POLL decides";
  PingpongOptions polling;
  ASSERT_EQ(parse({"pingpong", "--idle-poll", "250us"}, polling, &add_pingpong_options), "");
  EXPECT_EQ(polling.net.idle_poll, std::chrono::microseconds(250));
  TtcpOptions ttcp;
  ASSERT_EQ(parse({"ttcp", "--in-process", "--workers", "2"}, ttcp, &add_ttcp_options), "");
  EXPECT_EQ(ttcp.count, 81920u);
  EXPECT_EQ(ttcp.size_bytes, 1000u);
  EXPECT_EQ(ttcp.net.duration_s, 0);
}

// ---- frames ----

struct Exchange {
  std::array<std::byte, tools::kHeader16Size> header;
  std::vector<std::byte> body;
};

// A request as the client sends it, which is also the reply a byte-exact echo server sends.
Exchange request(std::uint32_t syn, const RequestPattern& pattern) {
  Exchange e;
  request_header(syn, tools::Command::echo, static_cast<std::uint32_t>(pattern.payload_size()))
      .store(e.header);
  const std::span<const std::byte> payload = pattern.payload(syn);
  e.body.assign(payload.begin(), payload.end());
  return e;
}

TEST(TernBenchFrame, HeaderFieldsAreBigEndianAtTheirOffsets) {
  const tools::Header16 h{
      .len = 0x01020304, .cmd = 0x0506, .ver = 0x0708, .syn = 0x090a0b0c, .ack = 0x0d0e0f10};
  std::array<std::byte, tools::kHeader16Size> bytes{};
  h.store(bytes);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    EXPECT_EQ(std::to_integer<int>(bytes[i]), static_cast<int>(i + 1)) << "byte " << i;
  const tools::Header16 back = tools::Header16::load(bytes);
  EXPECT_EQ(back.len, h.len);
  EXPECT_EQ(back.cmd, h.cmd);
  EXPECT_EQ(back.ver, h.ver);
  EXPECT_EQ(back.syn, h.syn);
  EXPECT_EQ(back.ack, h.ack);
  tools::store_header16_ack(bytes, 0xa1b2c3d4);
  EXPECT_EQ(tools::Header16::load(bytes).ack, 0xa1b2c3d4u);
  EXPECT_EQ(std::to_integer<int>(bytes[12]), 0xa1);
  EXPECT_EQ(std::to_integer<int>(bytes[11]), 0x0c);  // syn untouched
}

TEST(TernBenchFrame, RequestsCarrySynAsAckAndAPayloadPerSyn) {
  const RequestPattern pattern(300);
  const Exchange e = request(77, pattern);
  const tools::Header16 h = tools::Header16::load(e.header);
  EXPECT_EQ(h.len, 300u);
  EXPECT_EQ(h.cmd, 1u);
  EXPECT_EQ(h.ver, 1u);
  EXPECT_EQ(h.syn, 77u);
  EXPECT_EQ(h.ack, 77u);
  EXPECT_EQ(static_cast<int>(e.body[0]), 77);
  EXPECT_EQ(static_cast<int>(e.body[10]), 87);
  EXPECT_NE(request(78, pattern).body, e.body) << "consecutive requests differ";
  std::string why;
  EXPECT_TRUE(check_reply(e.header, e.body, 77, pattern, &why)) << why;
}

TEST(TernBenchFrame, CatchesEveryCorruption) {
  const RequestPattern pattern(64);
  std::string why;

  Exchange flipped = request(5, pattern);
  flipped.body[40] ^= std::byte{0x01};
  EXPECT_FALSE(check_reply(flipped.header, flipped.body, 5, pattern, &why));
  EXPECT_NE(why.find("payload byte 40"), std::string::npos) << why;

  Exchange other = request(6, pattern);  // the reply to another request
  EXPECT_FALSE(check_reply(other.header, other.body, 5, pattern, &why));
  EXPECT_NE(why.find("syn 6 ack 6, expected the reply to syn 5"), std::string::npos) << why;

  Exchange wrong_ack = request(5, pattern);
  tools::Header16 h = tools::Header16::load(wrong_ack.header);
  h.ack = 4;
  h.store(wrong_ack.header);
  EXPECT_FALSE(check_reply(wrong_ack.header, wrong_ack.body, 5, pattern, &why));
  EXPECT_NE(why.find("ack 4"), std::string::npos) << why;

  Exchange short_body = request(5, pattern);
  short_body.body.pop_back();
  EXPECT_FALSE(check_reply(short_body.header, short_body.body, 5, pattern, &why));
  EXPECT_NE(why.find("len 64 (63 body bytes), expected 64"), std::string::npos) << why;

  Exchange wrong_len = request(5, pattern);
  h = tools::Header16::load(wrong_len.header);
  h.len = 65;
  h.store(wrong_len.header);
  EXPECT_FALSE(check_reply(wrong_len.header, wrong_len.body, 5, pattern, &why));
  EXPECT_NE(why.find("len 65"), std::string::npos) << why;

  Exchange wrong_cmd = request(5, pattern);
  h = tools::Header16::load(wrong_cmd.header);
  h.cmd = 2;
  h.store(wrong_cmd.header);
  EXPECT_FALSE(check_reply(wrong_cmd.header, wrong_cmd.body, 5, pattern, &why));
  EXPECT_NE(why.find("cmd 2"), std::string::npos) << why;

  Exchange shifted = request(5, pattern);  // the right header with a payload shifted by a byte
  shifted.body.erase(shifted.body.begin());
  shifted.body.push_back(std::byte{0});
  EXPECT_FALSE(check_reply(shifted.header, shifted.body, 5, pattern, &why));
  EXPECT_NE(why.find("payload byte 0"), std::string::npos) << why;
}

// ---- reports ----

TEST(TernBenchReport, JsonHasTheDocumentedFieldsInOrder) {
  Report report;
  report.mode = "traffic";
  report.target = "tern";
  report.params["threads"] = 4;
  report.params["payload_bytes"] = 1024;
  report.figures["packets"] = 1000;
  report.figures["pkg_per_s"] = round_to(1234.56789, 2);
  report.verified = true;
  report.client_cpu_pct = 87.54;
  const std::string line = report.json_line();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const Json parsed = Json::parse(line);
  std::vector<std::string> keys;
  for (const auto& [key, value] : parsed.items()) keys.push_back(key);
  const std::vector<std::string> expected = {
      "tool",     "mode",           "target",         "params",      "figures",        "errors",
      "verified", "client_cpu_pct", "server_cpu_pct", "machine_cpu", "error_messages", "notes"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(parsed["tool"], "tern-bench");
  EXPECT_EQ(parsed["mode"], "traffic");
  EXPECT_EQ(parsed["target"], "tern");
  EXPECT_EQ(parsed["params"]["threads"], 4);
  EXPECT_EQ(parsed["figures"]["pkg_per_s"], 1234.57);
  EXPECT_EQ(parsed["errors"], 0);
  EXPECT_EQ(parsed["verified"], true);
  EXPECT_EQ(parsed["client_cpu_pct"], 87.5);
  EXPECT_TRUE(parsed["server_cpu_pct"].is_null());
  EXPECT_TRUE(parsed["machine_cpu"].is_null());
  EXPECT_EQ(report.exit_status(), 0);
  EXPECT_NE(report.text().find("verified: yes, 0 errors"), std::string::npos) << report.text();

  report.machine_cpu = MachineSplit{.user_pct = 10.04,
                                    .system_pct = 55.55,
                                    .irq_pct = 30.0,
                                    .idle_pct = 4.41,
                                    .steal_pct = 0.0,
                                    .cpus = 2};
  const Json with_machine = Json::parse(report.json_line());
  EXPECT_EQ(with_machine["machine_cpu"]["cpus"], 2);
  EXPECT_EQ(with_machine["machine_cpu"]["user_pct"], 10.0);
  EXPECT_EQ(with_machine["machine_cpu"]["system_pct"], 55.6);
  EXPECT_EQ(with_machine["machine_cpu"]["irq_pct"], 30.0);
  EXPECT_EQ(with_machine["machine_cpu"]["idle_pct"], 4.4);
  EXPECT_EQ(with_machine["machine_cpu"]["steal_pct"], 0.0);
  EXPECT_NE(report.text().find("machine CPU (% of 2 CPUs): user 10.0, system 55.5, irq 30.0, "
                               "idle 4.4, steal 0.0"),
            std::string::npos)
      << report.text();
}

TEST(TernBenchReport, ErrorsFailTheRunAndKeepTheFirstMessages) {
  Report report;
  report.verified = true;
  for (int i = 0; i < 8; ++i) report.add_error("error " + std::to_string(i));
  EXPECT_EQ(report.errors, 8u);
  ASSERT_EQ(report.error_messages.size(), Report::kMaxErrorMessages);
  EXPECT_EQ(report.error_messages.front(), "error 0");
  EXPECT_EQ(report.exit_status(), 1);
  const std::string text = report.text();
  EXPECT_NE(text.find("FAILED: verified yes, 8 error(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("error 4"), std::string::npos);
  Report unverified;
  EXPECT_EQ(unverified.exit_status(), 1) << "a run is only good when verified";
}

TEST(TernBenchReport, LatencyFiguresAreMicrosecondsWithDecimals) {
  prof::Histogram ns;
  for (int i = 0; i < 99; ++i) ns.record(1500);
  ns.record(2'000'000);
  Json figures = Json::object();
  add_latency_figures(figures, ns, "rtt_");
  std::vector<std::string> keys;
  for (const auto& [key, value] : figures.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"rtt_mean_us", "rtt_p50_us", "rtt_p90_us", "rtt_p99_us",
                                            "rtt_p999_us", "rtt_min_us", "rtt_max_us"}));
  EXPECT_NEAR(figures["rtt_p50_us"].get<double>(), 1.5, 1.5 * 0.032);
  EXPECT_NE(figures["rtt_p50_us"].get<double>(), 1.0) << "not truncated to whole units";
  EXPECT_EQ(figures["rtt_min_us"].get<double>(), 1.5);
  EXPECT_EQ(figures["rtt_max_us"].get<double>(), 2000.0);
  EXPECT_NEAR(figures["rtt_mean_us"].get<double>(), (99 * 1.5 + 2000) / 100, 0.001);

  LatencyRecorder recorder(2);
  recorder.record(0, std::chrono::microseconds(10));
  recorder.record(1, std::chrono::microseconds(30));
  const prof::Histogram merged = recorder.merged();
  EXPECT_EQ(merged.count(), 2u);
  EXPECT_EQ(merged.max(), 30000u);

  Json empty = Json::object();
  add_latency_figures(empty, prof::Histogram());
  EXPECT_TRUE(empty["p99_us"].is_null());
}

// ---- CPU and progress ----

TEST(TernBenchCpu, ParsesProcStatEvenWithParenthesesInTheName) {
  const std::string line =
      "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 100 0 0";
  Result<std::uint64_t> ticks = parse_stat_cpu_ticks(line);
  ASSERT_TRUE(ticks);
  EXPECT_EQ(*ticks, 325u);
  EXPECT_FALSE(parse_stat_cpu_ticks("1234 no parenthesis S 1"));
  EXPECT_FALSE(parse_stat_cpu_ticks("1234 (short) S 1 2 3"));
  EXPECT_FALSE(parse_stat_cpu_ticks("1 (x) S 1 1 1 0 -1 0 0 0 0 0 ab 7 0"));
  EXPECT_TRUE(read_cpu_ticks(0));
  EXPECT_TRUE(read_cpu_ticks(::getpid()));
  EXPECT_FALSE(read_cpu_ticks(1073741823));
}

TEST(TernBenchCpu, MeterSeesABusyThread) {
  CpuMeter meter;
  meter.start();
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  volatile std::uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < end) spin = spin + 1;
  const std::optional<double> pct = meter.stop();
  ASSERT_TRUE(pct);
  EXPECT_GT(*pct, 0.0);
  EXPECT_LT(*pct, 100.0 * static_cast<double>(usable_cpu_count()) + 50.0);
}

TEST(TernBenchCpu, SplitsTheMachinesTimeByKind) {
  const std::string before_text =
      "cpu  100 20 300 1000 50 10 40 5 0 0\n"
      "cpu0 50 10 150 500 25 5 20 3 0 0\n"
      "cpu1 50 10 150 500 25 5 20 2 0 0\n"
      "intr 12345 0 0\n";
  Result<MachineTicks> before = parse_machine_ticks(before_text);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->user, 120u);
  EXPECT_EQ(before->system, 300u);
  EXPECT_EQ(before->idle, 1050u);
  EXPECT_EQ(before->irq, 50u);
  EXPECT_EQ(before->steal, 5u);
  EXPECT_EQ(before->cpus, 2u);

  // 200 ticks later: 20 user, 100 system, 60 irq, 10 idle, 10 steal.
  Result<MachineTicks> after =
      parse_machine_ticks("cpu  115 25 400 1005 55 20 90 15 0 0\ncpu0 1\ncpu1 1\n");
  ASSERT_TRUE(after);
  const std::optional<MachineSplit> split = machine_split(*before, *after);
  ASSERT_TRUE(split);
  EXPECT_DOUBLE_EQ(split->user_pct, 10.0);
  EXPECT_DOUBLE_EQ(split->system_pct, 50.0);
  EXPECT_DOUBLE_EQ(split->irq_pct, 30.0);
  EXPECT_DOUBLE_EQ(split->idle_pct, 5.0);
  EXPECT_DOUBLE_EQ(split->steal_pct, 5.0);
  EXPECT_EQ(split->cpus, 2u);
  EXPECT_FALSE(machine_split(*after, *before));   // counters went backwards
  EXPECT_FALSE(machine_split(*before, *before));  // no tick passed

  EXPECT_FALSE(parse_machine_ticks("cpu0 1 2 3\nintr 5\n"));  // no total line
  EXPECT_FALSE(parse_machine_ticks("cpu  1 2 3 x 5 6 7 8\n"));
  EXPECT_FALSE(parse_machine_ticks("cpu  1 2 3\n"));  // too few fields
  Result<MachineTicks> here = read_machine_ticks();
  ASSERT_TRUE(here);
  EXPECT_GE(here->cpus, 1u);
}

TEST(TernBenchProgress, MeterSumsSlotsAndTheLineShowsRateAndErrors) {
  Meter meter(3);
  meter.add_sent(0, 5);
  meter.add_done(1, 10, 1000);
  meter.add_done(2, 30, 3000);
  meter.add_error(2);
  const Meter::Totals totals = meter.totals();
  EXPECT_EQ(totals.sent, 5u);
  EXPECT_EQ(totals.done, 40u);
  EXPECT_EQ(totals.bytes, 4000u);
  EXPECT_EQ(totals.errors, 1u);
  ProgressSample sample;
  sample.elapsed_s = 2.0;
  sample.interval_s = 0.5;
  sample.total = totals;
  sample.delta.done = 25;
  EXPECT_EQ(Progress::rate_line("sessions")(sample),
            "[   2.0 s] 50 sessions/s (total 40), errors 1");
}

}  // namespace
}  // namespace tern::bench

// ---- the TCP counters of report 004 ----

TEST(TcpCounters, KeepTheListenAndSynCountersOfTheTcpExtLines) {
  const std::string netstat =
      "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPTimeouts TCPSynRetrans\n"
      "TcpExt: 1 20 21 30 40\n"
      "IpExt: InNoRoutes ListenOverflows\n"
      "IpExt: 0 99\n";
  const tern::bench::TcpCounters before = tern::bench::TcpCounters::parse(netstat);
  EXPECT_EQ(before.values.size(), 4u) << "SyncookiesSent and IpExt's lines are not kept";
  EXPECT_EQ(before.values.at("ListenOverflows"), 20u);
  EXPECT_EQ(before.values.at("TCPSynRetrans"), 40u);
  const tern::bench::TcpCounters after = tern::bench::TcpCounters::parse(
      "TcpExt: ListenOverflows ListenDrops TCPTimeouts TCPSynRetrans\nTcpExt: 25 26 30 47\n");
  EXPECT_EQ(after.since(before, "ListenOverflows"), 5u);
  EXPECT_EQ(after.since(before, "TCPSynRetrans"), 7u);
  EXPECT_EQ(after.since(before, "TCPTimeouts"), 0u);
  EXPECT_EQ(after.since(tern::bench::TcpCounters{}, "ListenOverflows"), 0u);
  EXPECT_TRUE(tern::bench::TcpCounters::parse("garbage").values.empty());
}
