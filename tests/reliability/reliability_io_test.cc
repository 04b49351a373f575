// io_uring refused at start-up: a forked child installs a seccomp filter that makes
// io_uring_setup fail (ENOSYS, as on a kernel without io_uring, or EPERM, as under a container's
// policy) before anything probes io_uring (the probe's result is cached per process, hence the
// fork). With backend auto the runtime must run on epoll, serve a socket round trip and log why;
// with the uring backend forced it must stop with a message naming the reason, not crash. The
// same way, epoll_pwait2 refused: the epoll reactor's timed waits must still wait and end.
// The parent runs no runtime and starts no thread, so each child starts from a clean process.
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "reliability/reliability_util.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/io.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace std::chrono_literals;

#if defined(__x86_64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "reliability_io_test knows the seccomp architecture of x86_64 and aarch64 only"
#endif

// Makes the system call `number` fail with `error` in this process from now on (other system
// calls are allowed). Returns whether the filter is installed.
bool refuse_system_call(std::uint32_t number, int error) {
  sock_filter program[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, number, 0, 1),
      BPF_STMT(BPF_RET | BPF_K,
               SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(error) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog filter = {.len = static_cast<unsigned short>(std::size(program)), .filter = program};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) == 0;
}

// Makes io_uring_setup fail with `error` in this process from now on.
bool refuse_io_uring_setup(int error) { return refuse_system_call(__NR_io_uring_setup, error); }

// How a child ended and what it wrote to stderr.
struct ChildEnd {
  int status = -1;  // the exit code, or 128 + the signal that killed it
  std::string err;
};

// Runs body in a forked child whose stderr goes to a pipe; the child exits with body's result.
ChildEnd run_in_child(const std::function<int()>& body) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    const int code = body();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  ChildEnd end;
  if (pid < 0) {
    ::close(pipe_fds[0]);
    return end;
  }
  // The child is bounded by its own patience; this is the parent's safety net.
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      end.err += "\n(the child was killed after 60 s)";
      break;
    }
    pollfd p = {pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n <= 0) break;
    end.err.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  end.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return end;
}

// A check in the child: prints what failed to stderr (the parent shows it) and counts it.
struct ChildChecks {
  int failures = 0;
  void expect(bool ok, const std::string& what) {
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "child check failed: %s\n", what.c_str());
  }
};

// A loopback round trip on the calling worker: listen, connect, accept, send, echo back.
bool socket_round_trip() {
  const tern::Deadline deadline = tern::deadline_after(20s);
  tern::Result<tern::net::TcpListener> listener =
      tern::net::TcpListener::bind(tern::net::Address::loopback(0));
  if (!listener) return false;
  tern::Result<tern::net::Address> address = listener->local_address();
  if (!address) return false;
  tern::Result<tern::net::TcpStream> client = tern::net::TcpStream::connect(*address, deadline);
  if (!client) return false;
  tern::Result<tern::net::TcpStream> server = listener->accept(deadline);
  if (!server) return false;
  const std::string ping = "ping over epoll";
  std::string got(ping.size(), '\0');
  return client->write_all(std::as_bytes(std::span(ping)), deadline) &&
         server->read_exact(std::as_writable_bytes(std::span(got)), deadline) &&
         server->write_all(std::as_bytes(std::span(got)), deadline) &&
         client->read_exact(std::as_writable_bytes(std::span(got)), deadline) && got == ping;
}

// The child of the auto-backend tests: io_uring refused with `error`, described as `reason`.
int auto_falls_back_to_epoll(int error, const std::string& reason) {
  ChildChecks checks;
  if (!refuse_io_uring_setup(error)) {
    std::fprintf(stderr, "cannot install the seccomp filter: %s\n", std::strerror(errno));
    return 2;
  }
  tern_test::LogCapture log;
  tern::Result<void> usable = tern::io::uring_available();
  checks.expect(!usable, "io_uring reported usable behind the filter");
  if (!usable) {
    checks.expect(usable.error().value() == error,
                  "uring_available failed with " + usable.error().message());
  }
  tern::Runtime runtime(
      {.workers = 2, .make_parker = tern::io::reactors(tern::io::BackendChoice::automatic)});
  runtime.run([&] {
    checks.expect(tern::io::current_backend() == tern::io::Backend::epoll,
                  "worker 0 does not run epoll");
    checks.expect(socket_round_trip(), "no socket round trip on worker 0");
    tern::Result<void> posted = tern::post(1, [&] {
      checks.expect(tern::io::current_backend() == tern::io::Backend::epoll,
                    "worker 1 does not run epoll");
    });
    checks.expect(posted.has_value(), "cannot post to worker 1");
  });
  checks.expect(log.has_line({"WARN", "using epoll because " + reason}),
                "the fall-back was not logged with its reason; the log:\n" + log.text());
  return checks.failures == 0 ? 0 : 1;
}

TEST(UringRefused, AutoFallsBackToEpollWhenTheKernelHasNone) {
  const ChildEnd end =
      run_in_child([] { return auto_falls_back_to_epoll(ENOSYS, "the kernel has no io_uring"); });
  EXPECT_EQ(end.status, 0) << end.err;
  EXPECT_NE(end.err.find("using epoll because the kernel has no io_uring (ENOSYS)"),
            std::string::npos)
      << end.err;
}

TEST(UringRefused, AutoFallsBackToEpollWhenAPolicyForbidsIt) {
  const ChildEnd end = run_in_child([] {
    return auto_falls_back_to_epoll(EPERM,
                                    "io_uring is disabled (kernel.io_uring_disabled or a "
                                    "seccomp policy: EPERM)");
  });
  EXPECT_EQ(end.status, 0) << end.err;
  EXPECT_NE(end.err.find("using epoll because io_uring is disabled"), std::string::npos) << end.err;
}

TEST(UringRefused, ForcedUringStopsWithTheReason) {
  for (const auto& [error, reason] :
       {std::pair{ENOSYS, "the kernel has no io_uring (ENOSYS)"},
        std::pair{EPERM,
                  "io_uring is disabled (kernel.io_uring_disabled or a seccomp policy: "
                  "EPERM)"}}) {
    const ChildEnd end = run_in_child([error = error] {
      if (!refuse_io_uring_setup(error)) return 2;
      tern::Runtime runtime(
          {.workers = 1, .make_parker = tern::io::reactors(tern::io::BackendChoice::uring)});
      runtime.run([] {});
      return 3;  // the runtime ran without io_uring
    });
    EXPECT_EQ(end.status, 128 + SIGABRT)
        << "expected an abort with a message, not another end; stderr:\n"
        << end.err;
    EXPECT_NE(end.err.find(std::string("FATAL")), std::string::npos) << end.err;
    EXPECT_NE(end.err.find(std::string("the io_uring backend was asked for but ") + reason),
              std::string::npos)
        << end.err;
  }
}

// epoll_pwait2 refused (kernels before 5.11, valgrind): the epoll reactor's timed waits fall back
// to epoll_wait in milliseconds, through tern's system call table, which the child counts. A
// reactor that kept calling the refused epoll_pwait2 would spin without waiting and never make
// a timed epoll_wait.
std::atomic<int> timed_epoll_waits{0};
int counting_epoll_wait(int epoll, epoll_event* events, int max, int timeout_ms) {
  if (timeout_ms > 0) timed_epoll_waits.fetch_add(1, std::memory_order_relaxed);
  return ::epoll_wait(epoll, events, max, timeout_ms);
}

TEST(EpollPwait2Refused, TimedWaitsWaitThroughEpollWait) {
  const ChildEnd end = run_in_child([] {
    ChildChecks checks;
    if (!refuse_system_call(__NR_epoll_pwait2, ENOSYS)) {
      std::fprintf(stderr, "cannot install the seccomp filter: %s\n", std::strerror(errno));
      return 2;
    }
    tern::detail::sys.epoll_wait = &counting_epoll_wait;
    tern::Runtime runtime(
        {.workers = 1, .make_parker = tern::io::reactors(tern::io::BackendChoice::epoll)});
    runtime.run([&] {
      const tern::Deadline slept_until = tern::deadline_after(30ms);
      checks.expect(tern::this_fiber::sleep_until(slept_until).has_value(),
                    "the sleep was cut short");
      checks.expect(tern::Clock::now() >= slept_until, "the sleep ended before its deadline");
      int fds[2];
      checks.expect(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0,
                    "no socket pair");
      std::array<std::byte, 16> buffer;
      tern::Result<std::size_t> got = tern::io::recv(fds[0], buffer, 0, tern::deadline_after(50ms));
      checks.expect(!got && got.error() == std::errc::timed_out,
                    "a read of a silent socket did not time out");
      tern::io::close(fds[0]);
      tern::io::close(fds[1]);
      checks.expect(socket_round_trip(), "no socket round trip");
    });
    checks.expect(timed_epoll_waits.load() > 0, "no timed wait went through epoll_wait");
    return checks.failures == 0 ? 0 : 1;
  });
  EXPECT_EQ(end.status, 0) << end.err;
}

}  // namespace
