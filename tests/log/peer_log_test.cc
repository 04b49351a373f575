// tern::log peer lines (tern/log/peer_log.h): the shared rate limit, the suppressed count in the
// next line and in the metric, and that a peer line never waits for a stuck sink or a full pipe.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tern/log/log.h"
#include "tern/log/peer_log.h"
#include "tern/prof/counter.h"

namespace {

using tern::log::PeerLogRate;

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

class MemorySink final : public tern::log::Sink {
 public:
  void write(std::string_view lines) override {
    std::lock_guard lock(mutex_);
    text_.append(lines);
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return split_lines(text_);
  }

 private:
  mutable std::mutex mutex_;
  std::string text_;
};

// Holds whoever writes to it until the test opens it.
class StuckSink final : public tern::log::Sink {
 public:
  void write(std::string_view) override {
    std::unique_lock lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  bool entered() {
    std::lock_guard lock(mutex_);
    return entered_;
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool open_ = false;
};

// Polls pred every millisecond until it holds or the timeout passes; whether it held. Threads.
template <typename Pred>
bool wait_until_condition(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

std::uint64_t prof_value(std::string_view name) {
  for (const tern::prof::Sample& sample : tern::prof::snapshot())
    if (sample.name == name) return sample.value;
  return 0;
}

class PeerLogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    tern::log::shutdown();
    tern::log::set_peer_log_rate({});
  }

  std::shared_ptr<MemorySink> start_synchronous() {
    auto sink = std::make_shared<MemorySink>();
    EXPECT_TRUE(tern::log::init({.sinks = {sink}, .synchronous = true}).has_value());
    return sink;
  }
};

TEST_F(PeerLogTest, DefaultRateIsABurstThenASteadyRate) {
  const PeerLogRate rate = tern::log::peer_log_rate();
  EXPECT_EQ(rate.burst, 20u);
  EXPECT_EQ(rate.per_second, 10.0);
}

TEST_F(PeerLogTest, BurstPassesTheRestIsCountedAndReportedInTheNextLine) {
  auto sink = start_synchronous();
  // One line an hour after the burst: nothing refills during the test.
  tern::log::set_peer_log_rate({.per_second = 1.0 / 3600, .burst = 5});
  const std::uint64_t total_before = tern::log::peer_log_suppressed();
  const std::uint64_t metric_before = prof_value("log.peer_suppressed");
  for (int i = 0; i < 100; ++i) TERN_PEER_LOG_WARN("bad frame {} from {}", i, "127.0.0.1:9");
  std::vector<std::string> lines = sink->lines();
  ASSERT_EQ(lines.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_NE(lines[i].find(" WARN  "), std::string::npos) << lines[i];
    EXPECT_TRUE(lines[i].ends_with("bad frame " + std::to_string(i) + " from 127.0.0.1:9"))
        << lines[i];
  }
  EXPECT_EQ(tern::log::peer_log_suppressed() - total_before, 95u);
  EXPECT_EQ(prof_value("log.peer_suppressed") - metric_before, 95u);

  tern::log::set_peer_log_rate({.per_second = 1000, .burst = 10});
  TERN_PEER_LOG_ERROR("reset by {}", "127.0.0.1:10");
  TERN_PEER_LOG_INFO("slow sender {}", 3);
  lines = sink->lines();
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_NE(lines[5].find(" ERROR "), std::string::npos) << lines[5];
  EXPECT_TRUE(lines[5].ends_with("reset by 127.0.0.1:10 [95 peer lines suppressed]")) << lines[5];
  EXPECT_TRUE(lines[6].ends_with("slow sender 3")) << lines[6];
}

TEST_F(PeerLogTest, TheBucketRefillsAtItsRate) {
  auto sink = start_synchronous();
  tern::log::set_peer_log_rate({.per_second = 50, .burst = 1});
  TERN_PEER_LOG_WARN("first");
  TERN_PEER_LOG_WARN("too soon");
  ASSERT_EQ(sink->lines().size(), 1u);
  // A new token comes 20 ms later; keep trying until it does.
  ASSERT_TRUE(wait_until_condition(
      [&] {
        TERN_PEER_LOG_WARN("later");
        return sink->lines().size() == 2u;
      },
      std::chrono::seconds(10)));
  EXPECT_NE(sink->lines()[1].find("later ["), std::string::npos) << sink->lines()[1];
}

TEST_F(PeerLogTest, ZeroRateSilencesPeerLinesButNotOthers) {
  auto sink = start_synchronous();
  tern::log::set_peer_log_rate({.per_second = 0, .burst = 0});
  TERN_PEER_LOG_ERROR("peer {}", 1);
  TERN_LOG_ERROR("own {}", 2);
  const std::vector<std::string> lines = sink->lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].ends_with("own 2"));
}

TEST_F(PeerLogTest, BelowTheLevelTakesNoTokenAndEvaluatesNothing) {
  auto sink = start_synchronous();
  tern::log::set_peer_log_rate({.per_second = 1.0 / 3600, .burst = 1});
  tern::log::set_level(tern::log::Level::warn);
  int evaluated = 0;
  TERN_PEER_LOG_INFO("hidden {}", ++evaluated);
  tern::log::set_level(tern::log::Level::info);
  EXPECT_EQ(evaluated, 0);
  TERN_PEER_LOG_INFO("shown");
  EXPECT_EQ(sink->lines().size(), 1u);
}

// With the block policy and a writer stuck in its sink, an ordinary line waits for room; a peer
// line is dropped instead, so the thread keeps going.
TEST_F(PeerLogTest, PeerLinesNeverWaitForAStuckAsynchronousWriter) {
  auto sink = std::make_shared<StuckSink>();
  ASSERT_TRUE(tern::log::init({.sinks = {sink}, .buffer_bytes = 16 * 1024}));
  tern::log::set_peer_log_rate({.per_second = 1e9, .burst = 1000000});
  TERN_LOG_INFO("first");
  ASSERT_TRUE(wait_until_condition([&] { return sink->entered(); }, std::chrono::seconds(10)));
  const std::uint64_t dropped_before = tern::log::dropped();
  std::atomic<bool> done{false};
  std::thread caller([&] {
    for (int i = 0; i < 20000; ++i) TERN_PEER_LOG_WARN("peer line {} of {}", i, "a bad client");
    done.store(true);
  });
  const bool finished = wait_until_condition([&] { return done.load(); }, std::chrono::seconds(30));
  sink->open();
  caller.join();
  EXPECT_TRUE(finished) << "a peer line waited for the stuck writer";
  EXPECT_GT(tern::log::dropped() - dropped_before, 0u);
}

// Without init() (synchronous, stderr) on a pipe nobody reads: a peer line gives up instead of
// blocking in write(2).
TEST_F(PeerLogTest, PeerLinesNeverWaitForAFullPipeWithoutInit) {
  tern::log::shutdown();
  tern::log::set_peer_log_rate({.per_second = 1e9, .burst = 1000000});
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  // Fill the pipe, then make its write end blocking again, as a stderr nobody drains is.
  ASSERT_EQ(::fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK), 0);
  const std::string chunk(4096, 'x');
  while (::write(pipe_fds[1], chunk.data(), chunk.size()) > 0) {
  }
  ASSERT_EQ(::fcntl(pipe_fds[1], F_SETFL, 0), 0);
  const int saved = ::dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_GE(::dup2(pipe_fds[1], STDERR_FILENO), 0);
  const std::uint64_t dropped_before = tern::log::dropped();
  std::atomic<bool> done{false};
  std::thread caller([&] {
    for (int i = 0; i < 1000; ++i) TERN_PEER_LOG_WARN("peer line {}", i);
    done.store(true);
  });
  const bool finished = wait_until_condition([&] { return done.load(); }, std::chrono::seconds(30));
  if (!finished) {
    // Unblock the caller: drain the pipe until it returns.
    ASSERT_EQ(::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK), 0);
    char drain[4096];
    while (!done.load())
      if (::read(pipe_fds[0], drain, sizeof drain) <= 0) std::this_thread::yield();
  }
  caller.join();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_TRUE(finished) << "a peer line blocked on the full pipe";
  EXPECT_EQ(tern::log::dropped() - dropped_before, 1000u);
}

// Many threads share one bucket: exactly `burst` lines get through, all others are counted.
TEST_F(PeerLogTest, OneBucketForTheWholeProcess) {
  auto sink = start_synchronous();
  tern::log::set_peer_log_rate({.per_second = 1.0 / 3600, .burst = 7});
  const std::uint64_t before = tern::log::peer_log_suppressed();
  const std::uint64_t dropped_before = tern::log::dropped();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 500; ++i) TERN_PEER_LOG_WARN("thread {} line {}", t, i);
    });
  for (std::thread& thread : threads) thread.join();
  // The 7 admitted lines are written, unless one found the sink lock held past its short wait
  // (a writing thread descheduled on a loaded machine): then it is counted as dropped.
  EXPECT_EQ(sink->lines().size() + (tern::log::dropped() - dropped_before), 7u);
  EXPECT_GE(sink->lines().size(), 1u);
  EXPECT_EQ(tern::log::peer_log_suppressed() - before, 4u * 500 - 7);
}

}  // namespace
