// tern::hook with libcurl's easy API (which waits in poll) in fibers against a Python HTTP
// server the test starts, under both backends: every body checked byte for byte while ticker
// fibers show the workers never stall.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "child_process.h"
#include "hook_test_util.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "test_scale.h"

namespace {

using namespace std::chrono_literals;

// What tests/hook/http_server.py answers to GET /<name>.
std::string body_for(const std::string& name) {
  const std::string line = "tern-hook " + name + "\n";
  std::string body;
  for (int i = 0; i < 2000; ++i) body += line;
  return body;
}

std::size_t append(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// GET url with curl's easy API; the body, and the HTTP status in `status` (0 if it failed).
std::string fetch(const std::string& url, long& status) {
  std::string body;
  status = 0;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  return body;
}

class CurlGlobal : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_EQ(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK); }
  void TearDown() override { curl_global_cleanup(); }
};
[[maybe_unused]] ::testing::Environment* const curl_global =
    ::testing::AddGlobalTestEnvironment(new CurlGlobal);

TEST(HookCurl, ManyFibersFetchWithTheEasyApi) {
  hook_test::ChildProcess server({"python3", "-u", TERN_HTTP_SERVER}, "ready");
  ASSERT_TRUE(server.started()) << server.output();
  const std::string base =
      "http://127.0.0.1:" + server.ready_line().substr(server.ready_line().find(' ') + 1) + "/";
  const int fibers = tern_test::scaled(200);
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    hook_test::warm_up_workers([&] {
      long status = 0;
      EXPECT_EQ(fetch(base + "warm", status), body_for("warm"));
    });
    hook_test::Tickers tickers;
    std::atomic<int> right{0};
    tern::WaitGroup done;
    hook_test::start_fibers(
        fibers, done,
        [&](int i) {
          const std::string name = "f" + std::to_string(i);
          long status = 0;
          const std::string body = fetch(base + name, status);
          if (status == 200 && body == body_for(name)) ++right;
        },
        1ms);  // the Python server starts a thread per connection: spread them a little
    ASSERT_TRUE(done.wait_for(240s));
    EXPECT_EQ(right.load(), fibers);
    EXPECT_LT(tickers.stop(), hook_test::kMaxLateness);
  });
}

// The same fetch on a plain thread: libc's calls, the same answer.
TEST(HookCurl, OnAPlainThreadTheSameCodeIsLibcs) {
  hook_test::ChildProcess server({"python3", "-u", TERN_HTTP_SERVER}, "ready");
  ASSERT_TRUE(server.started()) << server.output();
  const std::string base =
      "http://127.0.0.1:" + server.ready_line().substr(server.ready_line().find(' ') + 1) + "/";
  long status = 0;
  EXPECT_EQ(fetch(base + "plain", status), body_for("plain"));
  EXPECT_EQ(status, 200);
}

}  // namespace
