// tern::hook with a real client library and a real server: hiredis's synchronous API in
// fibers against a redis-server the test starts (under both backends). Many fibers each hold
// their own connection on two workers while ticker fibers show the workers never stall; the
// same code on a plain thread is libc's; a server killed mid-test fails every call with
// hiredis's own error and no fiber hangs.
#include <gtest/gtest.h>
#include <hiredis.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "hook_test_util.h"
#include "redis_server.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/offload.h"
#include "test_scale.h"
#include "wait_for_condition.h"

namespace {

using namespace std::chrono_literals;
using hook_test::RedisServer;

// The full size of the many-connections test (1,000 fibers x 200 rounds) in optimised builds.
// Debug builds, whose every step is several times slower, run a tenth of both (a twentieth of
// the fibers under AddressSanitizer): a ticker measures how long its worker takes to run every
// ready fiber once, and 500 clients per worker at unoptimised speed on a shared machine take
// longer than the bound without anything blocking.
#ifdef NDEBUG
constexpr int kRounds = 200;
const int kFibers = tern_test::scaled(1000);
#else
constexpr int kRounds = 20;
const int kFibers = tern_test::scaled(hook_test::kAddressSanitizer ? 50 : 100);
#endif

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Context connect_redis(std::uint16_t port) {
  const timeval timeout = {.tv_sec = 10, .tv_usec = 0};
  return Context(redisConnectWithTimeout("127.0.0.1", port, timeout));
}

Reply command(redisContext* c, const char* format, const std::string& a) {
  return Reply(static_cast<redisReply*>(redisCommand(c, format, a.c_str())));
}
Reply command(redisContext* c, const char* format, const std::string& a, const std::string& b) {
  return Reply(static_cast<redisReply*>(redisCommand(c, format, a.c_str(), b.c_str())));
}

// `rounds` SET/GET pairs of unique keys, every reply checked; the number that were right.
int set_get_rounds(redisContext* c, const std::string& owner, int rounds) {
  int right = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::string key = "k:" + owner + ":" + std::to_string(round);
    const std::string value = "v:" + owner + ":" + std::to_string(round * 7919);
    const Reply set = command(c, "SET %s %s", key, value);
    if (set == nullptr || set->type != REDIS_REPLY_STATUS || std::string(set->str) != "OK") break;
    const Reply get = command(c, "GET %s", key);
    if (get == nullptr || get->type != REDIS_REPLY_STRING ||
        std::string(get->str, get->len) != value)
      break;
    ++right;
  }
  return right;
}

// Raises the soft limit on open descriptors to what `needed` takes (as far as the hard limit
// allows; redis-server, started after, inherits it); false if it stays below.
bool allow_descriptors(rlim_t needed) {
  rlimit limit = {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= needed) return true;
  limit.rlim_cur = std::min(needed, limit.rlim_max);
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur >= needed;
}

TEST(HookRedis, ManyFibersEachWithTheirOwnSyncConnection) {
  // A connection per fiber here, and one per client in redis-server, with room to spare.
  ASSERT_TRUE(allow_descriptors(static_cast<rlim_t>(kFibers) + 256))
      << "the hard limit on open descriptors is below " << kFibers + 256;
  RedisServer redis;
  ASSERT_TRUE(redis.started()) << redis.output();
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    hook_test::warm_up_workers([&] {
      const Context c = connect_redis(redis.port());
      EXPECT_TRUE(c != nullptr && c->err == 0);
      if (c != nullptr && c->err == 0) {
        EXPECT_EQ(set_get_rounds(c.get(), "warm", 1), 1);
      }
    });
    hook_test::Tickers tickers;
    std::atomic<int> connected{0};
    std::atomic<int> rounds_right{0};
    tern::WaitGroup done;
    hook_test::start_fibers(kFibers, done, [&](int i) {
      const Context c = connect_redis(redis.port());
      if (c != nullptr && c->err == 0) {
        ++connected;
        rounds_right += set_get_rounds(c.get(), std::to_string(i), kRounds);
      }
    });
    // A command the server holds for a second (BLPOP of an empty list) parks its fiber only: the
    // tickers on its worker go on.
    bool blpop_timed_out = false;
    tern::Fiber blocked = tern::spawn([&] {
      const Context c = connect_redis(redis.port());
      ASSERT_TRUE(c != nullptr && c->err == 0);
      const Reply reply = command(c.get(), "BLPOP %s %s", "hook:empty", "1");
      blpop_timed_out = reply != nullptr && reply->type == REDIS_REPLY_NIL;
    });
    ASSERT_TRUE(done.wait_for(240s));
    blocked.join();
    EXPECT_EQ(connected.load(), kFibers);
    EXPECT_EQ(rounds_right.load(), kFibers * kRounds);
    EXPECT_TRUE(blpop_timed_out);
    EXPECT_LT(tickers.stop(), hook_test::kMaxLateness);
  });
}

TEST(HookRedis, OnAPlainThreadTheSameCodeIsLibcs) {
  RedisServer redis;
  ASSERT_TRUE(redis.started()) << redis.output();
  std::thread plain([&] {
    const Context c = connect_redis(redis.port());
    ASSERT_TRUE(c != nullptr && c->err == 0) << (c ? c->errstr : "no context");
    EXPECT_EQ(set_get_rounds(c.get(), "plain", 50), 50);
    // hiredis's own timeout (SO_RCVTIMEO, the kernel's here): a BLPOP longer than it fails.
    const timeval short_timeout = {.tv_sec = 0, .tv_usec = 200'000};
    ASSERT_EQ(redisSetTimeout(c.get(), short_timeout), REDIS_OK);
    const Reply reply = command(c.get(), "BLPOP %s %s", "hook:empty", "2");
    EXPECT_EQ(reply, nullptr);
    EXPECT_EQ(c->err, REDIS_ERR_IO);
  });
  plain.join();
}

TEST(HookRedis, SoRcvtimeoOfHiredisTimesOutInAFiber) {
  RedisServer redis;
  ASSERT_TRUE(redis.started()) << redis.output();
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    const Context c = connect_redis(redis.port());
    ASSERT_TRUE(c != nullptr && c->err == 0);
    const timeval short_timeout = {.tv_sec = 0, .tv_usec = 200'000};
    ASSERT_EQ(redisSetTimeout(c.get(), short_timeout), REDIS_OK);
    const Reply reply = command(c.get(), "BLPOP %s %s", "hook:empty", "2");
    EXPECT_EQ(reply, nullptr);
    EXPECT_EQ(c->err, REDIS_ERR_IO);  // EAGAIN, as a blocking socket's timeout reads
  });
}

TEST(HookRedis, AServerKilledMidTestFailsEveryCallAndNoFiberHangs) {
  RedisServer redis;
  ASSERT_TRUE(redis.started()) << redis.output();
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    hook_test::warm_up_workers([&] {
      const Context c = connect_redis(redis.port());
      EXPECT_TRUE(c != nullptr && c->err == 0);
    });
    hook_test::Tickers tickers;
    constexpr int kClients = 20;
    std::atomic<int> working{0};  // clients that connected and did a first round
    std::atomic<int> rounds{0};
    std::atomic<int> failed_as_hiredis_says{0};
    tern::WaitGroup done;
    hook_test::start_fibers(kClients, done, [&](int i) {
      const Context c = connect_redis(redis.port());
      if (c != nullptr && c->err == 0) {
        const std::string owner = "killed" + std::to_string(i);
        if (set_get_rounds(c.get(), owner, 1) == 1) ++working;
        while (set_get_rounds(c.get(), owner, 1) == 1) ++rounds;
        if (c->err == REDIS_ERR_EOF || c->err == REDIS_ERR_IO) ++failed_as_hiredis_says;
      }
    });
    ASSERT_TRUE(tern_test::wait_until_condition(
        [&] { return working.load() == kClients && rounds.load() >= 200; },
        tern::deadline_after(60s)));
    tern::io::offload([&] { redis.kill(); });  // SIGKILL and reap, off the worker
    ASSERT_TRUE(done.wait_for(30s)) << "a fiber still waits on the dead server";
    EXPECT_EQ(failed_as_hiredis_says.load(), kClients);
    // The workers go on serving: a fresh fiber on each runs and a new connection is refused
    // with hiredis's error, at once.
    tern::WaitGroup after;
    after.add(2);
    for (std::size_t w = 0; w < 2; ++w) {
      ASSERT_TRUE(tern::post(w, [&] {
        const Context c = connect_redis(redis.port());
        EXPECT_TRUE(c == nullptr || c->err != 0);
        after.done();
      }));
    }
    ASSERT_TRUE(after.wait_for(30s));
    EXPECT_LT(tickers.stop(), hook_test::kMaxLateness);
  });
}

}  // namespace
