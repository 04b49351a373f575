// tern::io::wait_for_stop_signal and block_stop_signals (tern/io/signal.h) on the backend named by
// TERN_IO (ctest runs this binary once per backend); the signal masks of the threads tern starts;
// and signal_child, a server in a child process stopped by SIGTERM or SIGINT that must exit 0
// with every line it logged in its log file.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/offload.h"
#include "tern/io/signal.h"
#include "tern/log/log.h"
#include "test_scale.h"
#include "wait_for_condition.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;

// A safety net for waits that something else must end promptly; never a guess at how long
// something takes. Generous: the child processes run under sanitizers too.
constexpr auto kPatience = 60s;
tern::Deadline patience() { return tern::deadline_after(kPatience); }

// Runs fn as the first fiber of a runtime with `workers` workers and reactors.
template <typename Fn>
void on_workers(std::size_t workers, Fn&& fn) {
  tern::Runtime runtime({.workers = workers});
  runtime.run(std::forward<Fn>(fn));
}

// wait_until_condition with this file's patience() as the deadline. Worker fibers only.
template <typename Pred>
bool wait_for_condition(Pred pred) {
  return tern_test::wait_until_condition(pred, patience());
}

// The asynchronous process signals every thread tern starts blocks, and the signals it must
// leave alone (synchronous ones, which the crash and stack overflow handlers need; SIGPIPE;
// SIGPROF, which profilers send to the thread using the CPU).
constexpr int kProcessSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,  SIGUSR1,
                                   SIGUSR2, SIGALRM, SIGCHLD, SIGWINCH, SIGTSTP};
constexpr int kLeftAlone[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGPIPE, SIGPROF};

sigset_t current_mask() {
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return mask;
}

void expect_tern_thread_mask(const sigset_t& mask, const std::string& thread) {
  for (const int signal : kProcessSignals)
    EXPECT_EQ(::sigismember(&mask, signal), 1)
        << thread << " leaves " << ::strsignal(signal) << " unblocked";
  for (const int signal : kLeftAlone)
    EXPECT_EQ(::sigismember(&mask, signal), 0) << thread << " blocks " << ::strsignal(signal);
}

// The blocked signals of thread `tid` of this process, from /proc (SigBlk).
std::optional<sigset_t> blocked_signals_of(pid_t tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("SigBlk:")) continue;
    const unsigned long long bits = std::strtoull(line.c_str() + 7, nullptr, 16);
    sigset_t mask;
    ::sigemptyset(&mask);
    for (int signal = 1; signal <= 64; ++signal)
      if ((bits >> (signal - 1)) & 1) ::sigaddset(&mask, signal);
    return mask;
  }
  return std::nullopt;
}

// The ids of this process's threads named `name`.
std::vector<pid_t> threads_named(std::string_view name) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string text;
    std::getline(comm, text);
    if (text == name)
      found.push_back(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  }
  return found;
}

TEST(StopSignal, ReturnsSigtermSentToTheProcessWhileOtherFibersRun) {
  on_workers(2, [] {
    tern::io::block_stop_signals();
    // Nothing is pending: a short wait times out.
    tern::Result<int> early = tern::io::wait_for_stop_signal(tern::deadline_after(1ms));
    ASSERT_FALSE(early.has_value()) << "a stop signal was already pending: " << *early;
    EXPECT_EQ(early.error(), std::errc::timed_out);

    std::atomic<bool> done{false};
    std::atomic<long> ticks_here{0};
    std::atomic<long> ticks_there{0};
    std::atomic<bool> there_finished{false};
    tern::Fiber ticker = tern::spawn([&] {
      while (!done.load() && tern::this_fiber::sleep_for(1ms)) ++ticks_here;
    });
    ASSERT_TRUE(tern::post(1, [&] {
      while (!done.load() && tern::this_fiber::sleep_for(1ms)) ++ticks_there;
      there_finished.store(true);
    }));
    // The ticker on worker 1 uses this frame: it must have finished before the frame is left,
    // whichever way the test ends.
    struct StopTickerThere {
      std::atomic<bool>& done;
      std::atomic<bool>& finished;
      ~StopTickerThere() {
        done.store(true);
        EXPECT_TRUE(wait_for_condition([&] { return finished.load(); }));
      }
    } stop_ticker_there{done, there_finished};
    tern::Result<int> received = tern::fail(std::errc::io_error);
    bool returned = false;
    tern::Fiber waiter = tern::spawn([&] {
      received = tern::io::wait_for_stop_signal(patience());
      returned = true;
    });
    // The waiter is parked; fibers on both workers keep running meanwhile.
    EXPECT_TRUE(wait_for_condition([&] { return ticks_here >= 5 && ticks_there >= 5; }));
    EXPECT_FALSE(returned);
    ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
    waiter.join();
    ASSERT_TRUE(received.has_value()) << received.error().message();
    EXPECT_EQ(*received, SIGTERM);
    const long after = ticks_here.load();
    EXPECT_TRUE(wait_for_condition([&] { return ticks_here > after; }));
    done.store(true);
    ticker.join();
  });
}

TEST(StopSignal, ReturnsSigintRaisedOnTheWaitingWorker) {
  on_workers(2, [] {
    tern::Result<int> received = tern::fail(std::errc::io_error);
    std::atomic<bool> finished{false};
    ASSERT_TRUE(tern::post(1, [&] {
      tern::io::block_stop_signals();
      ::raise(SIGINT);  // directed at this thread, which blocks it: pending until the wait
      received = tern::io::wait_for_stop_signal(patience());
      finished.store(true);
    }));
    EXPECT_TRUE(wait_for_condition([&] { return finished.load(); }));
    ASSERT_TRUE(received.has_value()) << received.error().message();
    EXPECT_EQ(*received, SIGINT);
  });
}

TEST(StopSignal, EachSignalEndsOneWait) {
  on_workers(1, [] {
    tern::io::block_stop_signals();
    ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
    ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
    std::vector<int> received;
    for (int i = 0; i < 2; ++i) {
      tern::Result<int> signal = tern::io::wait_for_stop_signal(patience());
      ASSERT_TRUE(signal.has_value()) << signal.error().message();
      received.push_back(*signal);
    }
    std::ranges::sort(received);
    EXPECT_EQ(received, (std::vector<int>{SIGINT, SIGTERM}));
    tern::Result<int> third = tern::io::wait_for_stop_signal(tern::deadline_after(1ms));
    EXPECT_FALSE(third.has_value());
  });
}

TEST(StopSignal, HonoursItsDeadline) {
  on_workers(1, [] {
    const auto start = tern::Clock::now();
    tern::Result<int> signal = tern::io::wait_for_stop_signal(tern::deadline_after(50ms));
    ASSERT_FALSE(signal.has_value());
    EXPECT_EQ(signal.error(), std::errc::timed_out);
    EXPECT_GE(tern::Clock::now() - start, 50ms);
    tern::Result<int> past = tern::io::wait_for_stop_signal(tern::Clock::now() - 1s);
    ASSERT_FALSE(past.has_value());
    EXPECT_EQ(past.error(), std::errc::timed_out);
  });
}

TEST(StopSignal, IsInterruptible) {
  on_workers(1, [] {
    tern::Result<int> received = tern::fail(std::errc::io_error);
    bool started = false;
    tern::Fiber waiter = tern::spawn([&] {
      started = true;
      received = tern::io::wait_for_stop_signal();
    });
    EXPECT_TRUE(wait_for_condition([&] { return started; }));
    waiter.interrupt();
    waiter.join();
    ASSERT_FALSE(received.has_value());
    EXPECT_EQ(received.error(), std::errc::operation_canceled);
  });
}

TEST(StopSignal, EndsWhenTheRuntimeShutsDown) {
  std::atomic<bool> canceled{false};
  on_workers(1, [&] {
    tern::spawn([&] {
      tern::Result<int> signal = tern::io::wait_for_stop_signal();
      canceled.store(!signal && signal.error() == std::errc::operation_canceled);
    }).detach();
  });
  EXPECT_TRUE(canceled.load());
}

// A thread of the program's own that does not block the stop signals: tern's handler runs there
// in place of the default action (ending the process) and hands the signal to the waiting fiber.
TEST(StopSignal, CatchesASignalLandingOnAThreadThatDoesNotBlockIt) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  std::atomic<bool> unblocked{false};
  std::thread bystander([&] {
    const sigset_t none = [] {
      sigset_t set;
      ::sigemptyset(&set);
      return set;
    }();
    ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    unblocked.store(true);
    // Blocks in poll until released: ThreadSanitizer runs a handler at once only in calls it
    // knows to block (poll, not read), else at the thread's next intercepted call.
    pollfd released = {.fd = pipe_fds[0], .events = POLLIN, .revents = 0};
    while (::poll(&released, 1, -1) <= 0) {
    }
  });
  on_workers(1, [&] {
    tern::io::block_stop_signals();  // installs the handler before the signal is sent
    tern::Result<int> received = tern::fail(std::errc::io_error);
    tern::Fiber waiter =
        tern::spawn([&] { received = tern::io::wait_for_stop_signal(patience()); });
    EXPECT_TRUE(wait_for_condition([&] { return unblocked.load(); }));
    ASSERT_EQ(::pthread_kill(bystander.native_handle(), SIGTERM), 0);
    waiter.join();
    ASSERT_TRUE(received.has_value()) << received.error().message();
    EXPECT_EQ(*received, SIGTERM);
  });
  ASSERT_EQ(::write(pipe_fds[1], "x", 1), 1);
  bystander.join();
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

// The runtime's workers (but the caller's thread), the offload pool and the log writer block the
// asynchronous process signals themselves, even when the thread that starts them blocks nothing.
TEST(ThreadSignals, ThreadsTernStartsBlockTheProcessSignals) {
  std::thread starter([] {
    sigset_t none;
    ::sigemptyset(&none);
    ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    ASSERT_TRUE(tern::log::init({}));
    tern::log::flush();  // the writer has run (and named itself) once a flush returns
    const std::vector<pid_t> writers = threads_named("tern-log");
    ASSERT_EQ(writers.size(), 1u);
    const std::optional<sigset_t> writer_mask = blocked_signals_of(writers[0]);
    ASSERT_TRUE(writer_mask.has_value());
    expect_tern_thread_mask(*writer_mask, "the log writer");
    tern::log::shutdown();

    on_workers(2, [] {
      const sigset_t caller = current_mask();
      EXPECT_EQ(::sigismember(&caller, SIGTERM), 0) << "run() changed its caller's mask";
      std::optional<sigset_t> worker_mask;
      std::atomic<bool> read{false};
      ASSERT_TRUE(tern::post(1, [&] {
        worker_mask = current_mask();
        read.store(true);
      }));
      EXPECT_TRUE(wait_for_condition([&] { return read.load(); }));
      ASSERT_TRUE(worker_mask.has_value());
      expect_tern_thread_mask(*worker_mask, "worker 1");
      const sigset_t pool_mask = tern::io::offload([] { return current_mask(); });
      expect_tern_thread_mask(pool_mask, "an offload pool thread");
    });
    const sigset_t after = current_mask();
    EXPECT_EQ(::sigismember(&after, SIGTERM), 0) << "run() left its caller's mask changed";
  });
  starter.join();
}

// --- signal_child: a server in a child process, stopped by a signal --------------------------

// A child process with its stdout on a pipe; killed and reaped if the test leaves it running.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  // Starts `path` with args, with no signal blocked or ignored (this process blocks some).
  bool start(const std::string& path, const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawnattr_t attributes;
    ::posix_spawnattr_init(&attributes);
    sigset_t none;
    ::sigemptyset(&none);
    sigset_t defaults;
    ::sigemptyset(&defaults);
    ::sigaddset(&defaults, SIGINT);
    ::sigaddset(&defaults, SIGTERM);
    ::posix_spawnattr_setsigmask(&attributes, &none);
    ::posix_spawnattr_setsigdefault(&attributes, &defaults);
    ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::vector<char*> argv{const_cast<char*>(path.c_str())};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const int error =
        ::posix_spawn(&pid_, path.c_str(), &actions, &attributes, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attributes);
    ::close(fds[1]);
    out_ = fds[0];
    if (error != 0) pid_ = -1;
    return error == 0;
  }

  pid_t pid() const { return pid_; }

  // The next line the child printed, or nullopt at end of output or at the deadline.
  std::optional<std::string> read_line(tern::Deadline deadline) {
    for (;;) {
      if (const std::size_t end = buffer_.find('\n'); end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return line;
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - tern::Clock::now());
      if (left <= 0ms) return std::nullopt;
      pollfd ready = {.fd = out_, .events = POLLIN, .revents = 0};
      const int polled = ::poll(&ready, 1, static_cast<int>(left.count()));
      if (polled < 0 && errno == EINTR) continue;
      if (polled <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = ::read(out_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // The child's wait status once it exits, or nullopt at the deadline (it is left running).
  std::optional<int> wait_exit(tern::Deadline deadline) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd >= 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - tern::Clock::now());
      pollfd ready = {.fd = pidfd, .events = POLLIN, .revents = 0};
      int polled;
      do {
        polled = ::poll(&ready, 1, static_cast<int>(std::max(left, 0ms).count()));
      } while (polled < 0 && errno == EINTR);
      ::close(pidfd);
      if (polled <= 0) return std::nullopt;
    }
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return std::nullopt;
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
};

// The numbers N of the lines "<prefix>N" in the log file at path, in the order found.
std::vector<std::uint64_t> numbers_logged(const std::string& path, std::string_view prefix) {
  std::vector<std::uint64_t> numbers;
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    const std::size_t at = line.find(prefix);
    if (at == std::string::npos) continue;
    numbers.push_back(std::strtoull(line.c_str() + at + prefix.size(), nullptr, 10));
  }
  return numbers;
}

// Whether `numbers` holds each of 1..count exactly once; else says which is missing.
testing::AssertionResult holds_one_to(std::vector<std::uint64_t> numbers, std::uint64_t count) {
  std::ranges::sort(numbers);
  for (std::uint64_t n = 1; n <= count; ++n) {
    if (n > numbers.size() || numbers[n - 1] != n)
      return testing::AssertionFailure() << "line " << n << " of " << count << " is missing or "
                                         << "repeated (" << numbers.size() << " found)";
  }
  if (numbers.size() != count)
    return testing::AssertionFailure() << numbers.size() << " lines for " << count << " logged";
  return testing::AssertionSuccess();
}

// A blocking loopback TCP connection to port (timeouts as a safety net), or -1.
int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const timeval timeout = {.tv_sec = kPatience.count(), .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One request (8 bytes) and its acknowledgement, the number of the line the child logged for it;
// nullopt once the child has closed the connection.
std::optional<std::uint64_t> request(int fd, std::uint64_t value) {
  if (::send(fd, &value, sizeof value, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof value))
    return std::nullopt;
  std::uint64_t ack = 0;
  std::size_t got = 0;
  while (got < sizeof ack) {
    const ssize_t n = ::recv(fd, reinterpret_cast<char*>(&ack) + got, sizeof ack - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  return ack;
}

struct ChildCase {
  const char* mode;  // signal_child's MODE
  int signal;
};

void PrintTo(const ChildCase& which, std::ostream* out) {
  *out << which.mode << " " << ::strsignal(which.signal);
}

class SignalChild : public testing::TestWithParam<ChildCase> {};

// The child serves requests, each logged, while a fiber of its own logs too; it gets the signal
// with requests in flight, stops, logs more, returns from main and exits 0; its log file holds
// every line it says it logged, including every acknowledged request.
TEST_P(SignalChild, StopsOnTheSignalAndKeepsEveryLogLine) {
  const ChildCase which = GetParam();
  const std::string log_path =
      (std::filesystem::temp_directory_path() /
       ("tern_signal_test_" + std::to_string(::getpid()) + "_" + which.mode + ".log"))
          .string();
  std::filesystem::remove(log_path);
  Child child;
  ASSERT_TRUE(child.start(TERN_SIGNAL_CHILD, {which.mode, log_path})) << std::strerror(errno);
  const std::optional<std::string> ready = child.read_line(patience());
  ASSERT_TRUE(ready.has_value()) << "signal_child did not start";
  unsigned port = 0;
  ASSERT_EQ(std::sscanf(ready->c_str(), "ready %u", &port), 1) << *ready;

  const int fd = connect_to(static_cast<std::uint16_t>(port));
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const int before_signal = tern_test::scaled(1000);
  std::vector<std::uint64_t> acknowledged;
  for (int i = 0; i < before_signal; ++i) {
    const std::optional<std::uint64_t> ack = request(fd, static_cast<std::uint64_t>(i));
    ASSERT_TRUE(ack.has_value()) << "request " << i << " failed before the signal";
    acknowledged.push_back(*ack);
  }
  ASSERT_EQ(::kill(child.pid(), which.signal), 0);
  // Requests go on until the child closes the connection as it stops.
  for (std::uint64_t i = 0;; ++i) {
    const std::optional<std::uint64_t> ack = request(fd, i);
    if (!ack) break;
    acknowledged.push_back(*ack);
  }
  ::close(fd);

  const std::optional<std::string> summary = child.read_line(patience());
  if (!summary) {
    const std::optional<int> status = child.wait_exit(patience());
    FAIL() << "signal_child did not say it stopped; "
           << (!status                ? std::string("it is still running")
               : WIFSIGNALED(*status) ? "signal " + std::to_string(WTERMSIG(*status)) + " ended it"
                                      : "it exited with " + std::to_string(WEXITSTATUS(*status)));
  }
  int signal = 0;
  unsigned long long requests = 0;
  unsigned long long bulk = 0;
  int final_lines = 0;
  unsigned long long dropped = 1;
  ASSERT_EQ(std::sscanf(summary->c_str(),
                        "stopped signal=%d requests=%llu bulk=%llu final=%d "
                        "dropped=%llu",
                        &signal, &requests, &bulk, &final_lines, &dropped),
            5)
      << *summary;
  const std::optional<int> status = child.wait_exit(patience());
  ASSERT_TRUE(status.has_value()) << "signal_child did not exit";
  ASSERT_TRUE(WIFEXITED(*status)) << "signal_child ended by signal "
                                  << (WIFSIGNALED(*status) ? WTERMSIG(*status) : 0);
  EXPECT_EQ(WEXITSTATUS(*status), 0);
  EXPECT_EQ(signal, which.signal);
  EXPECT_EQ(dropped, 0u);
  EXPECT_GE(requests, acknowledged.size());
  for (const std::uint64_t ack : acknowledged) EXPECT_LE(ack, requests);

  EXPECT_TRUE(holds_one_to(numbers_logged(log_path, "request #"), requests)) << "requests";
  EXPECT_TRUE(holds_one_to(numbers_logged(log_path, "bulk #"), bulk)) << "bulk";
  EXPECT_TRUE(
      holds_one_to(numbers_logged(log_path, "final #"), static_cast<std::uint64_t>(final_lines)))
      << "final";
  if (!HasFailure()) std::filesystem::remove(log_path);
}

INSTANTIATE_TEST_SUITE_P(Modes, SignalChild,
                         testing::Values(ChildCase{"main", SIGTERM}, ChildCase{"none", SIGINT},
                                         ChildCase{"thread", SIGTERM}),
                         [](const testing::TestParamInfo<ChildCase>& info) {
                           return std::string(info.param.mode);
                         });

}  // namespace
