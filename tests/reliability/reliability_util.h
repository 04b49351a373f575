// Helpers shared by the fault tests (tests/reliability/*_test.cc): a log capture, an abortive
// close (RST), a descriptor table filled on purpose, the process's CPU time.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tern/log/log.h"
#include "tern/net/tcp_stream.h"

namespace tern_test {

// Keeps every log line in memory (and copies it to stderr, where ctest shows it on failure).
class MemorySink final : public tern::log::Sink {
 public:
  void write(std::string_view lines) override {
    {
      std::lock_guard lock(mutex_);
      text_.append(lines);
    }
    stderr_.write(lines);
  }
  std::string text() const {
    std::lock_guard lock(mutex_);
    return text_;
  }

 private:
  mutable std::mutex mutex_;
  std::string text_;
  tern::log::StderrSink stderr_;
};

// Routes tern::log into a MemorySink (synchronously: no writer thread) for the scope's life.
// Create and destroy it off the runtime's workers (before Runtime::run, after it returns).
class LogCapture {
 public:
  // Captures lines at `level` and above; the logger is synchronous while the capture lives.
  explicit LogCapture(tern::log::Level level = tern::log::Level::info)
      : sink_(std::make_shared<MemorySink>()) {
    EXPECT_TRUE(tern::log::init({.sinks = {sink_}, .level = level, .synchronous = true}));
  }
  ~LogCapture() { tern::log::shutdown(); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Whether one line holds every part. Any thread.
  bool has_line(std::initializer_list<std::string_view> parts) const {
    const std::string text = sink_->text();
    std::size_t begin = 0;
    while (begin < text.size()) {
      std::size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      const std::string_view line(text.data() + begin, end - begin);
      if (std::all_of(parts.begin(), parts.end(),
                      [&](std::string_view part) { return line.find(part) != line.npos; })) {
        return true;
      }
      begin = end + 1;
    }
    return false;
  }
  std::string text() const { return sink_->text(); }

 private:
  std::shared_ptr<MemorySink> sink_;
};

// Closes the stream abortively: SO_LINGER {1, 0} makes close(2) send a reset (RST) instead of a
// FIN. Worker fibers.
inline void reset_and_close(tern::net::TcpStream& stream) {
  const linger abort_on_close = {.l_onoff = 1, .l_linger = 0};
  EXPECT_EQ(
      ::setsockopt(stream.fd(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close), 0);
  stream.close();
}

// The CPU time (user + system) the whole process has used so far. Any thread.
inline std::chrono::microseconds process_cpu_time() {
  rusage usage = {};
  ::getrusage(RUSAGE_SELF, &usage);
  auto micros = [](const timeval& t) {
    return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
  };
  return micros(usage.ru_utime) + micros(usage.ru_stime);
}

// Runs the process out of file descriptors on purpose: lowers the soft RLIMIT_NOFILE to a few
// descriptors above those open now (restored on destruction, with every descriptor it opened
// closed) and fills the table with /dev/null descriptors on demand. Any one thread at a time.
class DescriptorHog {
 public:
  // headroom: free slots left under the new limit for what the test opens before fill().
  explicit DescriptorHog(int headroom) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    null_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(null_fd_, 0);
    set_limit(highest_open() + 1 + headroom);
  }
  ~DescriptorHog() {
    release_all();
    ::close(null_fd_);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  DescriptorHog(const DescriptorHog&) = delete;
  DescriptorHog& operator=(const DescriptorHog&) = delete;

  // Sets the soft limit: new descriptors must be below it (those open already stay valid).
  void set_limit(int limit) {
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(limit);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0) << "setrlimit " << limit;
    limit_ = limit;
  }
  int limit() const { return limit_; }

  // Takes every free slot under the limit; how many it took.
  int fill() {
    int taken = 0;
    for (;;) {
      const int fd = ::fcntl(null_fd_, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) {
        EXPECT_EQ(errno, EMFILE);
        return taken;
      }
      held_.push_back(fd);
      ++taken;
    }
  }
  // Takes one descriptor now (the lowest free slot) and returns it, or -1.
  int take_one() {
    const int fd = ::fcntl(null_fd_, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0) held_.push_back(fd);
    return fd;
  }
  // Gives back the n lowest descriptors it holds.
  void release_lowest(std::size_t n) {
    std::sort(held_.begin(), held_.end());
    n = std::min(n, held_.size());
    for (std::size_t i = 0; i < n; ++i) ::close(held_[i]);
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  // Gives back the n highest descriptors it holds.
  void release_highest(std::size_t n) {
    std::sort(held_.begin(), held_.end());
    n = std::min(n, held_.size());
    for (std::size_t i = 0; i < n; ++i) ::close(held_[held_.size() - 1 - i]);
    held_.resize(held_.size() - n);
  }
  void release_all() { release_lowest(held_.size()); }
  std::size_t held() const { return held_.size(); }

  // The lowest descriptor number free now.
  int lowest_free() const {
    const int fd = ::fcntl(null_fd_, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0) ::close(fd);
    return fd;
  }

 private:
  static int highest_open() {
    int highest = 2;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      highest = std::max(highest, std::stoi(entry.path().filename().string()));
    }
    return highest;
  }

  rlimit saved_ = {};
  int null_fd_ = -1;
  int limit_ = 0;
  std::vector<int> held_;
};

}  // namespace tern_test
