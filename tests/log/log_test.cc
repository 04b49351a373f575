// tern::log: levels and filters, line format, sinks and rotation, block and drop policies,
// threads that exit, fibers, long messages, counters, FATAL and the crash handler.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "log/log_min_level.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/log/log.h"
#include "tern/prof/counter.h"
#include "test_scale.h"

namespace {

namespace fs = std::filesystem;
using tern::log::Level;
using tern::log::Options;
using tern::log::Policy;

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) {
      lines.emplace_back(text);
      break;
    }
    lines.emplace_back(text.substr(0, end));
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

pid_t os_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

const std::regex kLine(
    R"(^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) (.+?) ([^ :]+):(\d+) (.*)$)");

// The message part of a line (after "<date> <time> <LEVEL> <context> <file>:<line> ").
std::string message_of(const std::string& line) {
  std::smatch m;
  return std::regex_match(line, m, kLine) ? m[12].str() : std::string("(not a log line) " + line);
}

// Keeps every line in memory.
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
  std::vector<std::string> messages() const {
    std::vector<std::string> out;
    for (const std::string& line : lines()) out.push_back(message_of(line));
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::string text_;
};

// Blocks the writer inside its first write until the test opens the gate.
class GateSink final : public tern::log::Sink {
 public:
  void write(std::string_view lines) override {
    std::unique_lock lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    text_.append(lines);
  }
  void wait_entered() {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(changed_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_; }));
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return split_lines(text_);
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool open_ = false;
  std::string text_;
};

// Checks "thread <t> seq <n>" lines as they arrive: every thread's numbers must come in order.
class SequenceSink final : public tern::log::Sink {
 public:
  void write(std::string_view lines) override {
    std::lock_guard lock(mutex_);
    for (const std::string& line : split_lines(lines)) {
      const std::size_t thread_at = line.find("thread ");
      const std::size_t seq_at = line.find(" seq ");
      if (thread_at == std::string::npos || seq_at == std::string::npos) {
        ++other_;
        continue;
      }
      const int thread = std::atoi(line.c_str() + thread_at + 7);
      const long seq = std::atol(line.c_str() + seq_at + 5);
      if (seq != next_[thread]) ++out_of_order_;
      next_[thread] = seq + 1;
      ++count_;
    }
  }
  long count() const {
    std::lock_guard lock(mutex_);
    return count_;
  }
  long out_of_order() const {
    std::lock_guard lock(mutex_);
    return out_of_order_;
  }
  long other() const {
    std::lock_guard lock(mutex_);
    return other_;
  }
  long next(int thread) const {
    std::lock_guard lock(mutex_);
    auto it = next_.find(thread);
    return it == next_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<int, long> next_;
  long count_ = 0;
  long out_of_order_ = 0;
  long other_ = 0;
};

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/tern_log_test.XXXXXX";
    const char* made = ::mkdtemp(pattern);
    EXPECT_NE(made, nullptr);
    path_ = made != nullptr ? made : "/tmp";
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::uint64_t prof_value(std::string_view name) {
  for (const tern::prof::Sample& sample : tern::prof::snapshot())
    if (sample.name == name) return sample.value;
  return 0;
}

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { tern::log::shutdown(); }

  // An asynchronous logger writing to a MemorySink.
  std::shared_ptr<MemorySink> start(Options options = {}) {
    auto sink = std::make_shared<MemorySink>();
    options.sinks.push_back(sink);
    EXPECT_TRUE(tern::log::init(std::move(options)).has_value());
    return sink;
  }
};

TEST_F(LogTest, EveryLevelHasItsNameTimeThreadFileAndLine) {
  auto sink = start({.level = Level::trace});
  const int first_line = __LINE__ + 1;
  TERN_LOG_TRACE("trace {}", 0);
  TERN_LOG_DEBUG("debug {}", 1);
  TERN_LOG_INFO("info {}", 2);
  TERN_LOG_WARN("warn {}", 3);
  TERN_LOG_ERROR("error {}", 4);
  const std::time_t now = std::time(nullptr);
  tern::log::flush();

  const std::vector<std::string> lines = sink->lines();
  ASSERT_EQ(lines.size(), 5u);
  const char* names[] = {"TRACE", "DEBUG", "INFO ", "WARN ", "ERROR"};
  const char* words[] = {"trace", "debug", "info", "warn", "error"};
  for (int i = 0; i < 5; ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, kLine)) << lines[i];
    EXPECT_EQ(m[8], names[i]);
    EXPECT_EQ(m[9], "t" + std::to_string(os_tid()));
    EXPECT_EQ(m[10], "log_test.cc");
    EXPECT_EQ(std::stoi(m[11]), first_line + i);
    EXPECT_EQ(m[12], std::string(words[i]) + " " + std::to_string(i));
    std::tm utc = {};
    utc.tm_year = std::stoi(m[1]) - 1900;
    utc.tm_mon = std::stoi(m[2]) - 1;
    utc.tm_mday = std::stoi(m[3]);
    utc.tm_hour = std::stoi(m[4]);
    utc.tm_min = std::stoi(m[5]);
    utc.tm_sec = std::stoi(m[6]);
    EXPECT_LE(std::abs(static_cast<long>(::timegm(&utc) - now)), 5) << "the time is UTC";
  }
}

TEST_F(LogTest, RunTimeLevelFiltersWithoutEvaluatingArguments) {
  auto sink = start({.level = Level::info});
  tern::log::set_level(Level::warn);
  EXPECT_EQ(tern::log::level(), Level::warn);
  int evaluated = 0;
  TERN_LOG_TRACE("trace {}", ++evaluated);
  TERN_LOG_DEBUG("debug {}", ++evaluated);
  TERN_LOG_INFO("info {}", ++evaluated);
  TERN_LOG_WARN("warn {}", ++evaluated);
  TERN_LOG_ERROR("error {}", ++evaluated);
  EXPECT_EQ(evaluated, 2);
  std::thread([] { tern::log::set_level(Level::trace); }).join();
  EXPECT_EQ(tern::log::level(), Level::trace);
  TERN_LOG_TRACE("trace again {}", ++evaluated);
  tern::log::flush();
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{"warn 1", "error 2", "trace again 3"}));
}

TEST_F(LogTest, CompileTimeMinimumLevelRemovesCalls) {
  auto sink = start({.level = Level::trace});
  EXPECT_EQ(log_around_min_level(), 2);
  tern::log::flush();
  EXPECT_EQ(sink->messages(),
            (std::vector<std::string>{"info at the minimum 1", "warn above the minimum 2"}));
}

struct Point {
  int x;
  int y;
};

}  // namespace

template <>
struct fmt::formatter<Point> : fmt::formatter<std::string_view> {
  auto format(const Point& p, fmt::format_context& context) const {
    return fmt::format_to(context.out(), "({}, {})", p.x, p.y);
  }
};

namespace {

TEST_F(LogTest, ArgumentsOfEveryKindFormatAsFmtWould) {
  auto sink = start();
  const char* c_string = "c-string";
  const char* null_string = nullptr;
  char array[16] = "array";
  std::string owned = "owned";
  int value = 7;
  const void* address = &value;
  TERN_LOG_INFO("{} {} {} {} {:.3f} {} {}", -5, 18446744073709551615ull, 'c', true, 3.14159, 1.5f,
                static_cast<short>(-2));
  TERN_LOG_INFO("{} {} {} {} {} {}", c_string, null_string, array, owned, std::string_view("sv"),
                std::string("temporary"));
  TERN_LOG_INFO("[{:>6}] [{:<4}] [{:^7}] [{:#x}]", 42, "ab", owned, 255);
  TERN_LOG_INFO("{} {}", address, nullptr);
  TERN_LOG_INFO("point {} then {}", Point{1, 2}, 3);  // a user type: formatted by the caller
  TERN_LOG_INFO("no arguments");
  tern::log::flush();
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{
                                  "-5 18446744073709551615 c true 3.142 1.5 -2",
                                  "c-string (null) array owned sv temporary",
                                  "[    42] [ab  ] [ owned ] [0xff]",
                                  fmt::format("{} 0x0", address),
                                  "point (1, 2) then 3",
                                  "no arguments",
                              }));
}

TEST_F(LogTest, PlainFieldsOfEveryKindFormatAsFmtWould) {
  auto sink = start();
  int value = 7;
  const void* address = &value;
  const long double wide = 2.5L;
  TERN_LOG_INFO("{} {} {} {} {} {} {} {}", 1.25, 0.1f, wide, true, false, 'z', address, -3);
  TERN_LOG_INFO("{}{}{}", static_cast<signed char>(-4), static_cast<unsigned char>(250),
                std::uint16_t{65535});
  TERN_LOG_INFO("{} and {} at the ends {}", "text", std::string(""), 18446744073709551615ull);
  TERN_LOG_INFO("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                11, 12, 13, 14, 15, 16, 17);  // more fields than the fast path takes
  tern::log::flush();
  EXPECT_EQ(
      sink->messages(),
      (std::vector<std::string>{
          fmt::format("{} {} {} {} {} {} {} {}", 1.25, 0.1f, wide, true, false, 'z', address, -3),
          "-4250" + std::string("65535"),
          "text and  at the ends 18446744073709551615",
          "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17",
      }));
}

TEST_F(LogTest, StderrSinkWritesToItsDescriptor) {
  TempDir dir;
  const fs::path path = dir.path() / "stderr.txt";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(tern::log::init({.sinks = {std::make_shared<tern::log::StderrSink>(fd)}}));
  TERN_LOG_WARN("to the descriptor {}", fd);
  tern::log::flush();
  const std::vector<std::string> lines = split_lines(read_file(path));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(message_of(lines[0]), "to the descriptor " + std::to_string(fd));
  tern::log::shutdown();
  ::close(fd);
}

TEST_F(LogTest, WithoutInitLinesGoToStderrSynchronouslyAtInfo) {
  tern::log::shutdown();
  EXPECT_EQ(tern::log::level(), Level::info);
  TempDir dir;
  const fs::path path = dir.path() / "stderr.txt";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  TERN_LOG_DEBUG("hidden");
  TERN_LOG_INFO("by default {}", 7);
  const std::string text = read_file(path);  // no flush: written before the call returned
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fd);
  const std::vector<std::string> lines = split_lines(text);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(std::regex_match(lines[0], kLine)) << lines[0];
  EXPECT_EQ(message_of(lines[0]), "by default 7");
}

TEST_F(LogTest, SynchronousModeWritesBeforeTheCallReturns) {
  auto sink = start({.synchronous = true});
  TERN_LOG_INFO("synchronous {}", 1);
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{"synchronous 1"}));
  std::thread([] { TERN_LOG_ERROR("from another thread"); }).join();
  EXPECT_EQ(sink->lines().size(), 2u);
}

TEST_F(LogTest, FileSinkAppendsAcrossInits) {
  TempDir dir;
  const fs::path path = dir.path() / "app.log";
  ASSERT_TRUE(tern::log::init({.file = {.path = path}}));
  for (int i = 0; i < 100; ++i) TERN_LOG_INFO("line {}", i);
  tern::log::shutdown();
  ASSERT_TRUE(tern::log::init({.file = {.path = path}}));
  TERN_LOG_INFO("line {}", 100);
  tern::log::flush();
  const std::vector<std::string> lines = split_lines(read_file(path));
  ASSERT_EQ(lines.size(), 101u);
  for (int i = 0; i < 101; ++i) EXPECT_EQ(message_of(lines[i]), "line " + std::to_string(i));
}

TEST_F(LogTest, FileSinkOpenFailureIsReported) {
  auto result = tern::log::init({.file = {.path = "/nonexistent-dir/app.log"}});
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error(), std::errc::no_such_file_or_directory);
}

TEST_F(LogTest, FileSinkRotatesBySizeKeepingBackups) {
  TempDir dir;
  const fs::path path = dir.path() / "app.log";
  constexpr std::uint64_t kMax = 2000;
  ASSERT_TRUE(tern::log::init({.file = {.path = path, .max_bytes = kMax, .backups = 3}}));
  for (int i = 0; i < 400; ++i) TERN_LOG_INFO("rotating line {:04}", i);
  tern::log::flush();

  EXPECT_FALSE(fs::exists(dir.path() / "app.log.4"));
  std::vector<int> numbers;
  for (const char* name : {"app.log.3", "app.log.2", "app.log.1", "app.log"}) {
    const fs::path file = dir.path() / name;
    ASSERT_TRUE(fs::exists(file)) << name;
    const std::string text = read_file(file);
    EXPECT_LE(text.size(), kMax) << name;
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n') << "a line is never split across files";
    for (const std::string& line : split_lines(text)) {
      ASSERT_TRUE(std::regex_match(line, kLine)) << line;
      numbers.push_back(std::stoi(message_of(line).substr(std::string("rotating line ").size())));
    }
  }
  ASSERT_FALSE(numbers.empty());
  EXPECT_EQ(numbers.back(), 399);
  for (std::size_t i = 1; i < numbers.size(); ++i) EXPECT_EQ(numbers[i], numbers[i - 1] + 1);
  EXPECT_LT(numbers.front(), 399 - 40) << "four files of ~2000 bytes hold well over 40 lines";
}

// Which of the pages of [begin, end) of the file at path are in the page cache.
std::vector<bool> cached_pages(const fs::path& path, std::size_t begin, std::size_t end) {
  std::vector<bool> cached;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return cached;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, end, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  EXPECT_NE(map, MAP_FAILED) << path;
  if (map == MAP_FAILED) return cached;
  std::vector<unsigned char> residency((end + page - 1) / page);
  EXPECT_EQ(::mincore(map, end, residency.data()), 0);
  ::munmap(map, end);
  for (std::size_t p = begin / page; p < residency.size(); ++p) cached.push_back(residency[p] & 1);
  return cached;
}

TEST_F(LogTest, FileSinkWritesBackAndDropsCleanPagesTwoWindowsBehind) {
  TempDir dir;
  struct statfs fs_info = {};
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs_info), 0);
  if (fs_info.f_type == TMPFS_MAGIC) GTEST_SKIP() << "tmpfs pages are the file: none to drop";
  const fs::path path = dir.path() / "window.log";
  constexpr std::size_t kWindow = 64 * 1024;
  auto sink = tern::log::FileSink::open({.path = path, .writeback_window = kWindow});
  ASSERT_TRUE(sink);
  // 1 KiB lines, so that the windows end exactly on writes.
  int next_line = 0;
  auto write_windows = [&](int windows) {
    for (std::size_t i = 0; i < windows * kWindow / 1024; ++i) {
      std::string line = fmt::format("line {:06}", next_line++);
      line.resize(1023, '.');
      (*sink)->write(line + "\n");
    }
  };
  write_windows(4);
  // Windows 0-3 (counting from 0) are on disk now; the sink's drops at the ends of windows 4
  // and 5 find windows 2 and 3 clean (its drops of windows 0 and 1 may have come while they
  // were dirty, and then kept them).
  const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  ASSERT_EQ(::fdatasync(reader), 0);
  ::close(reader);
  write_windows(2);

  const std::vector<bool> dropped = cached_pages(path, 2 * kWindow, 4 * kWindow);
  ASSERT_EQ(dropped.size(), 2 * kWindow / static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(std::count(dropped.begin(), dropped.end(), true), 0)
      << "windows 2 and 3 were clean and more than two windows back";
  const std::vector<bool> recent = cached_pages(path, 4 * kWindow, 6 * kWindow);
  EXPECT_EQ(std::count(recent.begin(), recent.end(), false), 0)
      << "the last two windows stay cached";
  EXPECT_EQ((*sink)->errors(), 0u);
  const std::vector<std::string> lines = split_lines(read_file(path));
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(next_line)) << "nothing lost";
  for (int i = 0; i < next_line; ++i) {
    ASSERT_EQ(lines[i].substr(0, 11), fmt::format("line {:06}", i));
  }
}

TEST_F(LogTest, FileSinkWritebackWindowOnADeviceIsNoError) {
  // /dev/null takes writes but has no pages to write back: the sink stops trying.
  auto sink = tern::log::FileSink::open({.path = "/dev/null", .writeback_window = 4096});
  ASSERT_TRUE(sink);
  const std::string lines(1023, '.');
  for (int i = 0; i < 16; ++i) (*sink)->write(lines + "\n");
  EXPECT_EQ((*sink)->errors(), 0u);
}

TEST_F(LogTest, FileSinkRotatesByDayWithAnInjectedClock) {
  TempDir dir;
  const fs::path path = dir.path() / "daily.log";
  // 2026-11-21 10:00:00 UTC, moved a day at a time by the test.
  auto now = std::make_shared<std::atomic<std::int64_t>>(1795255200);
  auto clock = [now] {
    return std::chrono::system_clock::time_point(std::chrono::seconds(now->load()));
  };
  ASSERT_TRUE(
      tern::log::init({.file = {.path = path, .daily = true, .backups = 2, .clock = clock}}));
  for (int day = 0; day < 4; ++day) {
    TERN_LOG_INFO("day {}", day);
    tern::log::flush();
    if (day < 3) now->fetch_add(86400);
  }
  now->fetch_add(3600);  // later the same day: no rotation
  TERN_LOG_INFO("day 3 again");
  tern::log::flush();

  auto messages = [&](const char* name) {
    std::vector<std::string> out;
    for (const std::string& line : split_lines(read_file(dir.path() / name)))
      out.push_back(message_of(line));
    return out;
  };
  EXPECT_EQ(messages("daily.log"), (std::vector<std::string>{"day 3", "day 3 again"}));
  EXPECT_EQ(messages("daily.log.1"), (std::vector<std::string>{"day 2"}));
  EXPECT_EQ(messages("daily.log.2"), (std::vector<std::string>{"day 1"}));
  EXPECT_FALSE(fs::exists(dir.path() / "daily.log.3")) << "day 0 was the oldest and is dropped";
}

TEST_F(LogTest, BlockPolicyLosesNothingAndKeepsEachThreadInOrder) {
  auto sink = std::make_shared<SequenceSink>();
  ASSERT_TRUE(
      tern::log::init({.sinks = {sink}, .policy = Policy::block, .buffer_bytes = 16 * 1024}));
  const std::uint64_t dropped_before = tern::log::dropped();
  constexpr int kThreads = 4;
  constexpr int per_thread = tern_test::scaled(100000);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < per_thread; ++i) TERN_LOG_INFO("thread {} seq {}", t, i);
    });
  }
  for (std::thread& thread : threads) thread.join();
  tern::log::flush();
  EXPECT_EQ(sink->count(), static_cast<long>(kThreads) * per_thread);
  EXPECT_EQ(sink->out_of_order(), 0);
  EXPECT_EQ(sink->other(), 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(sink->next(t), per_thread);
  EXPECT_EQ(tern::log::dropped(), dropped_before);
}

TEST_F(LogTest, DropPolicyCountsExactlyAndSaysSo) {
  auto sink = std::make_shared<GateSink>();
  ASSERT_TRUE(
      tern::log::init({.sinks = {sink}, .policy = Policy::drop, .buffer_bytes = 16 * 1024}));
  const std::uint64_t dropped_before = tern::log::dropped();
  const std::uint64_t counter_before = prof_value("log.dropped");
  TERN_LOG_INFO("first");
  sink->wait_entered();  // the writer is stuck in the sink: the ring fills up
  constexpr int kSent = 20000;
  for (int i = 0; i < kSent; ++i) TERN_LOG_INFO("message {}", i);
  sink->open();
  tern::log::flush();

  const std::uint64_t dropped = tern::log::dropped() - dropped_before;
  long written = 0;
  long last = -1;
  std::uint64_t reported = 0;
  for (const std::string& line : sink->lines()) {
    const std::string message = message_of(line);
    if (message.starts_with("message ")) {
      const long i = std::stol(message.substr(8));
      EXPECT_GT(i, last);
      last = i;
      ++written;
    } else if (message.ends_with(" messages dropped")) {
      EXPECT_NE(line.find(" WARN  tern-log "), std::string::npos) << line;
      reported += std::stoull(message);
    }
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_GT(written, 0);
  EXPECT_EQ(written + static_cast<long>(dropped), kSent);
  EXPECT_EQ(reported, dropped);
  EXPECT_EQ(prof_value("log.dropped") - counter_before, dropped);
}

TEST_F(LogTest, ThreadsThatExitLoseNothing) {
  auto sink = std::make_shared<SequenceSink>();
  ASSERT_TRUE(tern::log::init({.sinks = {sink}, .buffer_bytes = 16 * 1024}));
  const std::uint64_t written_before = tern::log::written();
  constexpr int kRounds = 4;
  constexpr int kThreads = 4;
  constexpr int per_thread = tern_test::scaled(2000);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([id = round * kThreads + t] {
        for (int i = 0; i < per_thread; ++i) TERN_LOG_INFO("thread {} seq {}", id, i);
      });
    }
    for (std::thread& thread : threads) thread.join();  // exited with records still queued
  }
  tern::log::flush();
  const long total = static_cast<long>(kRounds) * kThreads * per_thread;
  EXPECT_EQ(sink->count(), total);
  EXPECT_EQ(sink->out_of_order(), 0);
  EXPECT_EQ(tern::log::written() - written_before, static_cast<std::uint64_t>(total));
}

TEST_F(LogTest, FiberLinesNameTheWorkerAndTheFiber) {
  auto sink = start();
  std::uint64_t named_id = 0;
  std::uint64_t unnamed_id = 0;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    tern::spawn(
        [&] {
          named_id = tern::this_fiber::id();
          TERN_LOG_INFO("from a named fiber");
        },
        {.name = "conn"})
        .join();
    tern::spawn([&] {
      unnamed_id = tern::this_fiber::id();
      TERN_LOG_INFO("from an unnamed fiber");
    }).join();
    ASSERT_TRUE(tern::post(1, [] { TERN_LOG_INFO("on worker {}", tern::this_worker::index()); }));
  });
  TERN_LOG_INFO("from a plain thread");
  tern::log::flush();

  std::map<std::string, std::string> context_of;
  for (const std::string& line : sink->lines()) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, kLine)) << line;
    context_of[m[12]] = m[9];
  }
  EXPECT_EQ(context_of["from a named fiber"], "w0 f'conn'#" + std::to_string(named_id));
  EXPECT_EQ(context_of["from an unnamed fiber"], "w0 f#" + std::to_string(unnamed_id));
  EXPECT_TRUE(context_of["on worker 1"].starts_with("w1 f")) << context_of["on worker 1"];
  EXPECT_EQ(context_of["from a plain thread"], "t" + std::to_string(os_tid()));
}

TEST_F(LogTest, LongMessagesAreCutWithAMarker) {
  for (bool synchronous : {false, true}) {
    auto sink = start({.synchronous = synchronous});
    const std::string big(10000, 'x');
    std::string accents;
    for (int i = 0; i < 3000; ++i) accents += "\xc3\xa9";  // é, two bytes
    TERN_LOG_INFO("{}", big);       // too large for the ring: formatted by the caller
    TERN_LOG_INFO("{:>6000}", 7);   // small record, long text: cut by the writer
    TERN_LOG_INFO("a{}", accents);  // cut before a character, not inside one
    TERN_LOG_INFO("{} fits", std::string(4000, 'y'));
    tern::log::flush();
    const std::vector<std::string> messages = sink->messages();
    ASSERT_EQ(messages.size(), 4u);
    const std::string marker = " [truncated]";
    EXPECT_EQ(messages[0], std::string(tern::log::kMaxMessageBytes, 'x') + marker);
    EXPECT_EQ(messages[1], std::string(tern::log::kMaxMessageBytes, ' ') + marker);
    EXPECT_EQ(messages[2], "a" + accents.substr(0, tern::log::kMaxMessageBytes - 2) + marker);
    EXPECT_EQ(messages[3], std::string(4000, 'y') + " fits");
    tern::log::shutdown();
  }
}

// Deferred string arguments of every short length and a few long ones (the copy into the ring
// takes a different path below 4, 8 and 16 bytes, at each multiple of 16 and past 256) come out
// whole, and a neighbouring argument shows that nothing was written past their end.
TEST_F(LogTest, DeferredStringsOfEveryLengthArriveIntact) {
  auto sink = start();
  std::vector<std::string> texts;
  std::vector<std::size_t> lengths;
  for (std::size_t length = 0; length <= 70; ++length) lengths.push_back(length);
  for (std::size_t length : {255, 256, 257, 300, 2000}) lengths.push_back(length);
  for (std::size_t length : lengths) {
    std::string text;
    for (std::size_t i = 0; i < length; ++i) text += static_cast<char>('a' + (length + i) % 26);
    texts.push_back(text);
  }
  for (const std::string& text : texts) {
    TERN_LOG_INFO("[{}] [{}] {}", text, std::string_view(text), 7);
    TERN_LOG_INFO("[{}] {}", text.c_str(), 8);
  }
  tern::log::flush();
  const std::vector<std::string> messages = sink->messages();
  ASSERT_EQ(messages.size(), 2 * texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(messages[2 * i], "[" + texts[i] + "] [" + texts[i] + "] 7")
        << "length " << lengths[i];
    EXPECT_EQ(messages[2 * i + 1], "[" + texts[i] + "] 8") << "length " << lengths[i];
  }
  tern::log::shutdown();
}

TEST_F(LogTest, WrittenCounterCountsLines) {
  auto sink = start();
  const std::uint64_t counter_before = prof_value("log.written");
  const std::uint64_t written_before = tern::log::written();
  for (int i = 0; i < 10; ++i) TERN_LOG_INFO("counted {}", i);
  tern::log::flush();
  EXPECT_EQ(tern::log::written() - written_before, 10u);
  EXPECT_EQ(prof_value("log.written") - counter_before, 10u);
  EXPECT_EQ(sink->lines().size(), 10u);
}

TEST(LogDeathTest, FatalFlushesEveryThreadAndAborts) {
  TempDir dir;
  const fs::path path = dir.path() / "fatal.log";
  tern::log::shutdown();  // the death test forks: no writer thread in this process
  auto child = [&] {
    if (!tern::log::init({.file = {.path = path}})) std::_Exit(3);
    std::thread([] {
      for (int i = 0; i < 100; ++i) TERN_LOG_INFO("from a thread {}", i);
    }).join();
    for (int i = 0; i < 100; ++i) TERN_LOG_INFO("before {}", i);
    TERN_LOG_FATAL("fatal {}", 42);
  };
  EXPECT_DEATH(child(), "");
  const std::vector<std::string> lines = split_lines(read_file(path));
  ASSERT_EQ(lines.size(), 201u);
  int from_thread = 0;
  int before = 0;
  int fatal = 0;
  for (const std::string& line : lines) {
    const std::string message = message_of(line);
    from_thread += message.starts_with("from a thread ");
    before += message.starts_with("before ");
    if (message == "fatal 42") {
      ++fatal;
      EXPECT_NE(line.find(" FATAL "), std::string::npos) << line;
    }
  }
  EXPECT_EQ(from_thread, 100);
  EXPECT_EQ(before, 100);
  EXPECT_EQ(fatal, 1);
}

TEST(LogDeathTest, CrashHandlerFlushesBeforeTheSignal) {
  TempDir dir;
  const fs::path path = dir.path() / "crash.log";
  tern::log::shutdown();
  auto child = [&] {
    if (!tern::log::init({.file = {.path = path}})) std::_Exit(3);
    tern::log::install_crash_handler();
    for (int i = 0; i < 5000; ++i) TERN_LOG_INFO("pending {}", i);
    volatile int* volatile nowhere = nullptr;
    *nowhere = 1;  // a real fault: the handlers before ours see it again when it repeats
  };
  EXPECT_DEATH(child(), "");
  const std::vector<std::string> lines = split_lines(read_file(path));
  ASSERT_EQ(lines.size(), 5000u);
  EXPECT_EQ(message_of(lines.back()), "pending 4999");
}

}  // namespace
