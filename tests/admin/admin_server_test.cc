// The admin HTTP endpoint over real loopback connections, under the backend TERN_IO names:
// /metrics parsed by the reference Prometheus parser (prom_parse.py), /status parsed as JSON,
// and malformed or hostile requests answered (or closed) while good scrapes keep succeeding.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "admin/admin_http.h"
#include "net/net_test_util.h"
#include "tern/admin/admin_server.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/offload.h"
#include "tern/net/tcp_server.h"
#include "tern/prof/loop_profiler.h"
#include "tern/prof/metrics.h"
#include "tern/prof/status_sections.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using tern::admin::AdminServer;
using tern::net::Address;
using tern::net::TcpStream;
using tern_test::bytes_of;
using tern_test::patience;

constexpr std::string_view kScrape = "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";

// What came back on one connection.
struct Reply {
  bool connected = false;
  int status = 0;  // 0: the server closed without answering
  std::string head;
  std::string body;
};

// Sends `request` on a new connection and reads until the server closes it. Worker fibers.
Reply http_exchange(const Address& server, std::string_view request) {
  Reply reply;
  tern::Result<TcpStream> stream = TcpStream::connect(server, patience());
  if (!stream) return reply;
  reply.connected = true;
  if (!request.empty() && !stream->write_all(bytes_of(request), patience())) return reply;
  std::string all;
  std::array<std::byte, 16384> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream->read(buf, patience());
    if (!n || *n == 0) break;
    all += tern_test::text_of(std::span(buf).first(*n));
  }
  const std::size_t end = all.find("\r\n\r\n");
  if (!all.starts_with("HTTP/1.1 ") || end == std::string::npos) return reply;
  reply.status = std::stoi(all.substr(9, 3));
  reply.head = all.substr(0, end + 2);
  reply.body = all.substr(end + 4);
  return reply;
}

// The value of header `name` in a response head ("" if absent).
std::string header(const Reply& reply, std::string_view name) {
  const std::string key = "\r\n" + std::string(name) + ": ";
  const std::size_t at = reply.head.find(key);
  if (at == std::string::npos) return "";
  const std::size_t start = at + key.size();
  return reply.head.substr(start, reply.head.find("\r\n", start) - start);
}

// Runs tests/admin/prom_parse.py (the reference parser) on a /metrics body; the families as JSON,
// or a failure with the parser's complaint. Worker fibers.
testing::AssertionResult parse_metrics(const std::string& body, json* families) {
  return tern::io::offload([&]() -> testing::AssertionResult {
    char in_path[] = "/tmp/tern_admin_metrics_XXXXXX";
    const int in_fd = ::mkstemp(in_path);
    if (in_fd < 0) return testing::AssertionFailure() << "mkstemp failed";
    if (::write(in_fd, body.data(), body.size()) != static_cast<ssize_t>(body.size())) {
      ::close(in_fd);
      return testing::AssertionFailure() << "cannot write the body";
    }
    ::close(in_fd);
    const std::string out_path = std::string(in_path) + ".json";
    const std::string err_path = std::string(in_path) + ".err";
    const std::string command = std::string(TERN_PYTHON) + " " + TERN_PROM_PARSE + " < " + in_path +
                                " > " + out_path + " 2> " + err_path;
    const int status = std::system(command.c_str());
    std::ifstream out(out_path);
    std::ifstream err(err_path);
    std::stringstream complaint;
    complaint << err.rdbuf();
    ::unlink(in_path);
    ::unlink(out_path.c_str());
    ::unlink(err_path.c_str());
    if (status != 0)
      return testing::AssertionFailure()
             << "prom_parse.py rejected /metrics: " << complaint.str() << "\n--- body ---\n"
             << body;
    *families = json::parse(out);
    return testing::AssertionSuccess();
  });
}

// The sum of a family's samples named `sample` (with `label`=`value` if given).
double sum_of(const json& families, const std::string& family, const std::string& sample,
              const std::string& label = "", const std::string& value = "") {
  double sum = 0;
  for (const json& s : families.at(family).at("samples")) {
    if (s.at("name") != sample) continue;
    if (!label.empty() && (!s.at("labels").contains(label) || s.at("labels").at(label) != value))
      continue;
    sum += s.at("value").get<double>();
  }
  return sum;
}

// Echoes until the peer closes.
void echo(TcpStream& stream) {
  std::array<std::byte, 4096> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
    if (!stream.write_all(std::span(buf).first(*n))) return;
  }
}

TEST(AdminHttp, ParsesARequestHeadAsItArrives) {
  using tern::admin::detail::HeadState;
  using tern::admin::detail::parse_request_head;
  const std::string full = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
  // Every prefix is incomplete (never malformed), the whole is complete.
  for (std::size_t n = 0; n < full.size(); ++n)
    EXPECT_EQ(parse_request_head(full.substr(0, n), 8192).state, HeadState::incomplete) << n;
  const auto parsed = parse_request_head(full, 8192);
  ASSERT_EQ(parsed.state, HeadState::complete);
  EXPECT_EQ(parsed.request.method, "GET");
  EXPECT_EQ(parsed.request.target, "/metrics?x=1");
  EXPECT_EQ(parsed.request.path, "/metrics");
  EXPECT_EQ(parsed.request.minor_version, 1);
  EXPECT_EQ(parse_request_head("HEAD / HTTP/1.0\n\n", 8192).request.minor_version, 0);
}

TEST(AdminHttp, RejectsWhatCanNeverBeAHeadAtOnce) {
  using tern::admin::detail::HeadState;
  using tern::admin::detail::parse_request_head;
  for (const std::string& bad : std::vector<std::string>{
           std::string("\x16\x03\x01", 3), std::string("GET\0", 4), "GET  /", "GET metrics",
           "GET /a\x01", "GET / HTTP/2", "GET / HTTPS", "G(T / ", "GET / HTTP/1.1\r\n bad",
           "GET / HTTP/1.1\r\n: v", "GET /\r\n", "GET / HTTP/1.1\rX", "\r\n"})
    EXPECT_EQ(parse_request_head(bad, 8192).state, HeadState::malformed) << bad;
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\nX: " + std::string(9000, 'a'), 8192).state,
            HeadState::too_large);
  EXPECT_EQ(
      parse_request_head("GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n", 64).state,
      HeadState::too_large);
}

TEST(AdminHttp, KeepsTheAuthorizationHeaderAndMatchesBearerTokens) {
  using tern::admin::detail::bearer_token_matches;
  using tern::admin::detail::parse_request_head;
  const auto parsed = parse_request_head(
      "GET / HTTP/1.1\r\nHost: x\r\nAUTHORIZATION: \t Bearer abc \r\nX: y\r\n\r\n", 8192);
  ASSERT_EQ(parsed.state, tern::admin::detail::HeadState::complete);
  EXPECT_EQ(parsed.request.authorization, "Bearer abc");
  EXPECT_EQ(parse_request_head("GET / HTTP/1.1\r\n\r\n", 8192).request.authorization, "");

  EXPECT_TRUE(bearer_token_matches("Bearer abc", "abc"));
  EXPECT_TRUE(bearer_token_matches("bearer   abc", "abc"));
  for (std::string_view other : {"Bearer abd", "Bearer ab", "Bearer abcd", "Bearer", "Bearer ",
                                 "Bearerabc", "Basic abc", "abc", "", "Bearer abcabc"})
    EXPECT_FALSE(bearer_token_matches(other, "abc")) << other;
  EXPECT_FALSE(bearer_token_matches("Bearer ", ""));  // no token set never matches
}

TEST(AdminHttp, ResponsesAreComplete) {
  const std::string r = tern::admin::detail::http_response(404, "text/plain", "Not Found\n");
  EXPECT_EQ(r,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n"
            "Connection: close\r\nCache-Control: no-store\r\n\r\nNot Found\n");
  const std::string head = tern::admin::detail::http_response(200, "a/b", "body", true, "X: y\r\n");
  EXPECT_TRUE(
      head.ends_with("Content-Length: 4\r\nConnection: close\r\n"
                     "Cache-Control: no-store\r\nX: y\r\n\r\n"))
      << head;
}

// Destroying a running server is a contract violation: the fatal path names it and the fiber.
TEST(AdminEndpointDeathTest, DestroyedWhileRunningAbortsNamingTheFiber) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {
          tern::spawn(
              [] {
                auto server = std::make_unique<AdminServer>();
                ASSERT_TRUE(server->start(Address::loopback(0)));
                server.reset();
              },
              {.name = "admin-owner"})
              .join();
        });
      },
      "AdminServer destroyed while running; call stop\\(\\) first .*fiber \"admin-owner\"");
}

TEST(AdminEndpoint, MetricsAndStatusOfARuntimeStartedWithTheOption) {
  tern::Runtime runtime({.workers = 2,
                         .prof_interval = std::chrono::milliseconds(3'600'000),
                         .admin_address = "127.0.0.1:0"});
  runtime.run([] {
    const std::optional<Address> admin = tern::admin::runtime_admin_address();
    ASSERT_TRUE(admin.has_value());
    EXPECT_NE(admin->port(), 0);

    // Some traffic through a TcpServer: one connection stays open while we scrape. A listener
    // per worker puts an acceptor on worker 1 too.
    tern::net::TcpServer server({.accept_mode = tern::net::AcceptMode::reuse_port}, echo);
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    tern::Result<TcpStream> client = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(client);
    std::string payload(10000, 'x');
    std::string back(payload.size(), '\0');
    ASSERT_TRUE(client->write_all(bytes_of(payload), patience()));
    ASSERT_TRUE(client->read_exact(std::as_writable_bytes(std::span(back)), patience()));

#if TERN_PROF_ENABLED
    // Worker 1 runs the server's acceptor; wait until its profiler has seen it run.
    ASSERT_TRUE(tern_test::wait_for_condition([] {
      std::uint64_t runs = 0;
      tern::prof::LoopProfiler::for_each_totals(
          [&](std::size_t worker, tern::prof::LoopPhase phase, const tern::prof::PhaseTotals& t) {
            if (worker == 1 && phase == tern::prof::LoopPhase::run) runs += t.count;
          });
      return runs > 0;
    }));
#endif
    const Reply first = http_exchange(*admin, kScrape);
    ASSERT_EQ(first.status, 200) << first.head;
    const Reply reply = http_exchange(*admin, kScrape);  // now the first one is counted too
    ASSERT_EQ(reply.status, 200) << reply.head;
    EXPECT_EQ(header(reply, "Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(header(reply, "Content-Length"), std::to_string(reply.body.size()));
    EXPECT_EQ(header(reply, "Connection"), "close");

    json families;
    ASSERT_TRUE(parse_metrics(reply.body, &families));
    EXPECT_EQ(families.at("tern_fibers_alive").at("type"), "gauge");
    EXPECT_GE(sum_of(families, "tern_fibers_alive", "tern_fibers_alive"), 3.0);
    EXPECT_GE(sum_of(families, "tern_workers", "tern_workers"), 2.0);
    EXPECT_EQ(families.at("tern_net_connections_open").at("type"), "gauge");
    EXPECT_GE(sum_of(families, "tern_net_connections_open", "tern_net_connections_open"), 1.0);
#if TERN_PROF_ENABLED
    EXPECT_EQ(families.at("tern_net_connections_accepted").at("type"), "counter");
    // The echo connection (scrapes are the admin endpoint's, not a TcpServer's).
    EXPECT_GE(
        sum_of(families, "tern_net_connections_accepted", "tern_net_connections_accepted_total"),
        1.0);
    EXPECT_GE(sum_of(families, "tern_io_bytes_read", "tern_io_bytes_read_total"), 20000.0);
    EXPECT_GE(sum_of(families, "tern_io_bytes_written", "tern_io_bytes_written_total"), 20000.0);
    EXPECT_GE(sum_of(families, "tern_admin_requests", "tern_admin_requests_total", "code", "200"),
              1.0);
    EXPECT_TRUE(families.contains("tern_net_connections_closed"));
    // The profiler is on (prof_interval): each worker's phases, readable while it runs.
    const json& phases = families.at("tern_loop_phase_seconds");
    EXPECT_EQ(phases.at("type"), "summary");
    for (const char* worker : {"0", "1"}) {
      double runs = 0;
      for (const json& s : phases.at("samples"))
        if (s.at("name") == "tern_loop_phase_seconds_count" &&
            s.at("labels").at("worker") == worker && s.at("labels").at("phase") == "run")
          runs += s.at("value").get<double>();
      EXPECT_GT(runs, 0.0) << "worker " << worker;
    }
    EXPECT_EQ(families.at("tern_loop_phase_max_seconds").at("type"), "gauge");
#if __has_include(<tern/log/log.h>)
    // The logger's own counters, exported from tern::prof.
    EXPECT_EQ(families.at("tern_log_written").at("type"), "counter");
    EXPECT_EQ(families.at("tern_log_dropped").at("type"), "counter");
#endif
#endif

    // A layer admin does not see adds a section of its own; removed, it is gone again.
    const std::uint64_t section =
        tern::prof::add_status_section("test_section", [] { return std::string("{\"k\": [1]}"); });
    const Reply status = http_exchange(*admin, "GET /status HTTP/1.1\r\nHost: test\r\n\r\n");
    tern::prof::remove_status_section(section);
    const Reply without = http_exchange(*admin, "GET /status HTTP/1.1\r\nHost: test\r\n\r\n");
    EXPECT_FALSE(json::parse(without.body).contains("test_section")) << without.body;
    ASSERT_EQ(status.status, 200);
    EXPECT_EQ(header(status, "Content-Type"), "application/json");
    const json doc = json::parse(status.body);
    EXPECT_EQ(doc.at("workers"), 2);
    EXPECT_EQ(doc.at("test_section").at("k").at(0), 1) << status.body;
    EXPECT_EQ(doc.at("io_backend"), std::string(tern::io::to_string(tern::io::current_backend())));
    EXPECT_GE(doc.at("fibers_alive").get<double>(), 3.0);
    ASSERT_EQ(doc.at("fibers_alive_per_worker").size(), 2u);
    EXPECT_GE(doc.at("fibers_alive_per_worker")[0].get<double>(), 3.0);
    EXPECT_GT(doc.at("uptime_seconds").get<double>(), 0.0);
    EXPECT_GE(doc.at("connections").at("open").get<double>(), 1.0);
#if TERN_PROF_ENABLED
    // The counts agree: the scrapes are not TcpServer connections, so they are in neither.
    const json& connections = doc.at("connections");
    EXPECT_GE(connections.at("accepted").get<double>(), 1.0);
    EXPECT_EQ(connections.at("accepted").get<double>(),
              connections.at("open").get<double>() + connections.at("closed").get<double>())
        << connections.dump();
    EXPECT_GE(doc.at("bytes").at("read").get<double>(), 20000.0);
#endif

    client->close();
    server.stop(tern::deadline_after(5s));
  });
}

TEST(AdminEndpoint, StartsFromTernAdminAndOnlyWhenAsked) {
  tern::Runtime quiet({.workers = 1});
  ::unsetenv("TERN_ADMIN");
  quiet.run([] { EXPECT_FALSE(tern::admin::runtime_admin_address().has_value()); });

  ::setenv("TERN_ADMIN", "127.0.0.1:0", 1);
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    const std::optional<Address> admin = tern::admin::runtime_admin_address();
    ASSERT_TRUE(admin.has_value());
    EXPECT_EQ(http_exchange(*admin, "GET / HTTP/1.0\r\n\r\n").status, 200);
  });
  ::unsetenv("TERN_ADMIN");

  tern::Runtime off({.workers = 1, .admin_address = ""});  // the option wins over TERN_ADMIN
  ::setenv("TERN_ADMIN", "127.0.0.1:0", 1);
  off.run([] { EXPECT_FALSE(tern::admin::runtime_admin_address().has_value()); });
  ::unsetenv("TERN_ADMIN");
}

// A TERN_ADMIN that is not an address ends the program when the runtime starts, as a bad value
// of every TERN_ variable does, naming it, its value and why it is not an address.
TEST(AdminEndpointDeathTest, ABadTernAdminIsFatalAndSaysWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ::setenv("TERN_ADMIN", "localhost", 1);
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {});
      },
      "tern: TERN_ADMIN='localhost' is not valid: expected an address such as 127.0.0.1:9100 or "
      ":9100 \\(unset means no admin endpoint\\): 'localhost': missing port");
}

// A request that must get `status` (and whose response head must contain `contains`).
struct BadCase {
  std::string name;
  std::string request;
  int status;
  std::string contains;
};

TEST(AdminEndpoint, BadRequestsGetTheirStatusWhileGoodScrapesContinue) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    auto count_of = [](int code) {
      return static_cast<double>(
          tern::prof::MetricsRegistry::global()
              .counter("tern_admin_requests_total", "", {{"code", std::to_string(code)}})
              .value());
    };
    std::map<int, double> before;
    for (int code : {200, 400, 404, 405, 408, 431}) before[code] = count_of(code);

    AdminServer server({.head_timeout = 500ms, .max_head_bytes = 4096});
    tern::Result<Address> address = server.start(Address::loopback(0));
    ASSERT_TRUE(address);

    const std::vector<BadCase> cases = {
        {"garbage bytes", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11), 400, ""},
        {"no version", "GET /metrics\r\n\r\n", 400, ""},
        {"HTTP/2 line", "GET /metrics HTTP/2.0\r\n\r\n", 400, ""},
        {"header without colon", "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", 400, ""},
        {"folded header", "GET /metrics HTTP/1.1\r\nA: b\r\n  c\r\n\r\n", 400, ""},
        {"huge header", "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n",
         431, ""},
        {"unknown method", "BREW /metrics HTTP/1.1\r\n\r\n", 405, "\r\nAllow: GET, HEAD\r\n"},
        {"POST", "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405, ""},
        {"unknown path", "GET /nope HTTP/1.1\r\n\r\n", 404, ""},
        {"slowloris", "GET /metrics HTTP/1.1\r\nHost: slow\r\n", 408, ""},
        {"query and HTTP/1.0", "GET /status?pretty=1 HTTP/1.0\r\n\r\n", 200, "application/json"},
        {"bare LF lines", "GET / HTTP/1.1\nHost: x\n\n", 200, ""},
    };
    std::vector<tern::Fiber> fibers;
    std::atomic<int> good_scrapes{0};
    std::atomic<bool> bad_done{false};
    // Good scrapes run the whole time the bad clients do.
    fibers.push_back(tern::spawn([&] {
      while (!bad_done.load() || good_scrapes.load() < 3) {
        const Reply reply = http_exchange(*address, kScrape);
        EXPECT_EQ(reply.status, 200);
        if (reply.status != 200) return;
        EXPECT_NE(reply.body.find("# TYPE tern_fibers_alive gauge"), std::string::npos);
        ++good_scrapes;
        if (!tern::this_fiber::sleep_for(5ms)) return;
      }
    }));
    std::vector<tern::Fiber> bad;
    for (const BadCase& c : cases) {
      bad.push_back(tern::spawn([&c, &address] {
        const tern::Deadline started = tern::Clock::now();
        const Reply reply = http_exchange(*address, c.request);
        EXPECT_TRUE(reply.connected) << c.name;
        EXPECT_EQ(reply.status, c.status) << c.name << ": " << reply.head;
        if (!c.contains.empty()) {
          EXPECT_NE(reply.head.find(c.contains), std::string::npos) << c.name;
        }
        if (c.status == 408) {
          EXPECT_GE(tern::Clock::now() - started, 450ms) << c.name;
        }
      }));
    }
    // A client that sends half a request and vanishes: the server just closes its side.
    bad.push_back(tern::spawn([&address] {
      tern::Result<TcpStream> stream = TcpStream::connect(*address, patience());
      ASSERT_TRUE(stream);
      ASSERT_TRUE(stream->write_all(bytes_of("GET /metr"), patience()));
      stream->close();
    }));
    for (tern::Fiber& f : bad) f.join();
    bad_done = true;
    for (tern::Fiber& f : fibers) f.join();
    EXPECT_GE(good_scrapes.load(), 3);

#if TERN_PROF_ENABLED
    EXPECT_GE(count_of(400) - before[400], 5.0);
    EXPECT_GE(count_of(405) - before[405], 2.0);
    EXPECT_GE(count_of(404) - before[404], 1.0);
    EXPECT_GE(count_of(408) - before[408], 1.0);
    EXPECT_GE(count_of(431) - before[431], 1.0);
    EXPECT_GE(count_of(200) - before[200], 5.0);
#endif

    // HEAD: the headers of GET, no body.
    const Reply head = http_exchange(*address, "HEAD /metrics HTTP/1.1\r\n\r\n");
    EXPECT_EQ(head.status, 200);
    EXPECT_TRUE(head.body.empty());
    EXPECT_GT(std::stoul(header(head, "Content-Length")), 0u);
    server.stop();
  });
}

TEST(AdminEndpoint, ConnectionsOverTheLimitWaitForASlot) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    AdminServer server({.head_timeout = 1s, .max_connections = 2, .reserved_head_timeout = 1s});
    tern::Result<Address> address = server.start(Address::loopback(0));
    ASSERT_TRUE(address);
    // Two idle clients connect first and hold both places until the server times them out.
    std::vector<tern::Fiber> idle;
    std::atomic<int> connected{0};
    std::atomic<int> timed_out{0};
    for (int i = 0; i < 2; ++i) {
      idle.push_back(tern::spawn([&] {
        tern::Result<TcpStream> stream = TcpStream::connect(*address, patience());
        ASSERT_TRUE(stream);
        ++connected;
        std::string all;
        std::array<std::byte, 1024> buf;
        for (;;) {
          tern::Result<std::size_t> n = stream->read(buf, patience());
          if (!n || *n == 0) break;
          all += tern_test::text_of(std::span(buf).first(*n));
        }
        if (all.starts_with("HTTP/1.1 408 ")) ++timed_out;
      }));
    }
    ASSERT_TRUE(tern_test::wait_for_condition([&] { return connected.load() == 2; }));
    // The third waits in the listen backlog (not closed) and is answered once a slot frees,
    // when the server times an idle client out.
    const tern::Deadline started = tern::Clock::now();
    const Reply third = http_exchange(*address, kScrape);
    EXPECT_TRUE(third.connected);
    EXPECT_EQ(third.status, 200);
    EXPECT_GE(tern::Clock::now() - started, 900ms) << "answered before a slot was free";
    for (tern::Fiber& f : idle) f.join();
    EXPECT_EQ(timed_out.load(), 2);
    EXPECT_EQ(http_exchange(*address, kScrape).status, 200);
    server.stop();
  });
}

}  // namespace
