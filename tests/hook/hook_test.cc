// tern::hook's semantics under the backend named by TERN_IO (ctest runs this binary once per
// backend): blocking libc calls on loopback TCP sockets park the calling fiber and return what
// libc would (O_NONBLOCK, SO_RCVTIMEO, close and dup2 over a parked descriptor, interrupts,
// poll/select/epoll_wait), sleeps and name lookups do not hold the worker, and off the workers
// every call is libc's own.
#include "tern/hook/hook.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hook_test_util.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

// The _FORTIFY_SOURCE entry points (declared by glibc's headers only when fortifying).
extern "C" ssize_t __read_chk(int fd, void* buf, size_t count, size_t buffer_size);
extern "C" ssize_t __recv_chk(int fd, void* buf, size_t len, size_t buffer_size, int flags);
extern "C" int __poll_chk(pollfd* fds, nfds_t count, int timeout, size_t fds_size);

namespace {

using namespace std::chrono_literals;
using hook_test::connect_to;
using hook_test::Listener;

template <typename Fn>
void on_workers(std::size_t workers, Fn&& fn) {
  tern::Runtime runtime({.workers = workers});
  runtime.run(std::forward<Fn>(fn));
}

// A connected loopback TCP pair made with blocking libc calls: `client` from connect, `server`
// from accept.
struct TcpPair {
  Listener listener;
  int client = -1;
  int server = -1;
  TcpPair() {
    client = connect_to(listener.port);
    server = ::accept(listener.fd, nullptr, nullptr);
  }
  TcpPair(const TcpPair&) = delete;
  TcpPair& operator=(const TcpPair&) = delete;
  ~TcpPair() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
};

TEST(Hook, ABlockingReadParksTheFiberNotTheWorker) {
  on_workers(1, [] {
    EXPECT_TRUE(tern::hook::parks_fibers());
    TcpPair pair;
    ASSERT_GE(pair.client, 0);
    ASSERT_GE(pair.server, 0);
    // The program sees a blocking socket, as it made it.
    EXPECT_EQ(::fcntl(pair.client, F_GETFL) & O_NONBLOCK, 0);
    bool wrote = false;
    tern::Fiber writer = tern::spawn([&] {
      ASSERT_TRUE(tern::this_fiber::sleep_for(5ms));
      wrote = true;
      EXPECT_EQ(::write(pair.server, "ping", 4), 4);
    });
    char buf[8] = {};
    // Were the worker blocked here, the writer on the same worker could never run.
    EXPECT_EQ(::read(pair.client, buf, sizeof buf), 4);
    EXPECT_TRUE(wrote);
    EXPECT_EQ(std::string(buf, 4), "ping");
    writer.join();
  });
}

// Request and reply on blocking sockets, as a synchronous client library talks: each read that
// emptied the socket is followed by one that must wait for the next reply, and the last one,
// after the peer's final reply and close, returns the reply and then 0 (end of stream).
TEST(Hook, ReadsAfterAReadThatEmptiedTheSocketGetTheNextReplyAndTheClose) {
  on_workers(1, [] {
    TcpPair pair;
    constexpr int kRounds = 100;
    tern::Fiber server = tern::spawn([&] {
      char request[8];
      for (int i = 0; i < kRounds; ++i) {
        ASSERT_EQ(::read(pair.server, request, sizeof request), 4);
        ASSERT_EQ(::write(pair.server, "pong", 4), 4);
      }
      ASSERT_EQ(::read(pair.server, request, sizeof request), 4);
      ASSERT_EQ(::write(pair.server, "bye", 3), 3);
      EXPECT_EQ(::close(pair.server), 0);
      pair.server = -1;
    });
    char reply[16];
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_EQ(::write(pair.client, "ping", 4), 4);
      ASSERT_EQ(::read(pair.client, reply, sizeof reply), 4);
      ASSERT_EQ(std::string(reply, 4), "pong");
    }
    ASSERT_EQ(::send(pair.client, "quit", 4, 0), 4);
    ASSERT_EQ(::recv(pair.client, reply, sizeof reply, 0), 3);
    EXPECT_EQ(std::string(reply, 3), "bye");
    EXPECT_EQ(::recv(pair.client, reply, sizeof reply, 0), 0);
    EXPECT_EQ(::read(pair.client, reply, sizeof reply), 0);
    server.join();
  });
}

// A blocking socket's write returns only when all of it is written, however small the socket's
// buffer; the reader on the same worker runs meanwhile.
TEST(Hook, AWriteLargerThanTheSocketBufferWritesAllOfIt) {
  on_workers(1, [] {
    TcpPair pair;
    const std::string data(8 << 20, 'w');
    const std::size_t total = data.size() + (1 << 20);
    std::size_t received = 0;
    tern::Fiber reader = tern::spawn([&] {
      std::vector<char> buf(1 << 16);
      while (received < total) {
        const ssize_t n = ::read(pair.server, buf.data(), buf.size());
        if (n <= 0) break;
        received += static_cast<std::size_t>(n);
      }
    });
    EXPECT_EQ(::write(pair.client, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(::send(pair.client, data.data(), 1 << 20, 0), 1 << 20);
    reader.join();
    EXPECT_EQ(received, total);
  });
}

// What code built with _FORTIFY_SOURCE calls parks too.
TEST(Hook, FortifiedEntryPointsParkToo) {
  on_workers(1, [] {
    TcpPair pair;
    tern::Fiber writer = tern::spawn([&] {
      EXPECT_EQ(::write(pair.server, "ab", 2), 2);
      ASSERT_TRUE(tern::this_fiber::sleep_for(2ms));
      EXPECT_EQ(::write(pair.server, "c", 1), 1);
    });
    char buf[8];
    EXPECT_EQ(__read_chk(pair.client, buf, 2, sizeof buf), 2);
    pollfd readable = {.fd = pair.client, .events = POLLIN, .revents = 0};
    EXPECT_EQ(__poll_chk(&readable, 1, 10'000, sizeof readable), 1);
    EXPECT_EQ(__recv_chk(pair.client, buf, 1, sizeof buf, 0), 1);
    EXPECT_EQ(buf[0], 'c');
    writer.join();
  });
}

TEST(Hook, AUserSetNonblockingSocketGetsEagain) {
  on_workers(1, [] {
    TcpPair pair;
    const int flags = ::fcntl(pair.client, F_GETFL);
    ASSERT_EQ(::fcntl(pair.client, F_SETFL, flags | O_NONBLOCK), 0);
    EXPECT_NE(::fcntl(pair.client, F_GETFL) & O_NONBLOCK, 0);
    char buf[8];
    errno = 0;
    EXPECT_EQ(::read(pair.client, buf, sizeof buf), -1);
    EXPECT_EQ(errno, EAGAIN);
    errno = 0;
    EXPECT_EQ(::recv(pair.client, buf, sizeof buf, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
    // FIONBIO off again: blocking, as the program sees it, and a read waits for data.
    int off = 0;
    ASSERT_EQ(::ioctl(pair.client, FIONBIO, &off), 0);
    EXPECT_EQ(::fcntl(pair.client, F_GETFL) & O_NONBLOCK, 0);
    tern::Fiber writer = tern::spawn([&] { EXPECT_EQ(::send(pair.server, "a", 1, 0), 1); });
    EXPECT_EQ(::read(pair.client, buf, sizeof buf), 1);
    writer.join();
    // MSG_DONTWAIT still does not wait.
    errno = 0;
    EXPECT_EQ(::recv(pair.client, buf, sizeof buf, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
  });
}

TEST(Hook, SoRcvtimeoExpiresWithEagainAfterItsTime) {
  on_workers(1, [] {
    TcpPair pair;
    const timeval timeout = {.tv_sec = 0, .tv_usec = 100'000};
    ASSERT_EQ(::setsockopt(pair.client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout), 0);
    timeval seen = {};
    socklen_t length = sizeof seen;
    ASSERT_EQ(::getsockopt(pair.client, SOL_SOCKET, SO_RCVTIMEO, &seen, &length), 0);
    EXPECT_EQ(seen.tv_usec, 100'000);
    int ticks = 0;
    tern::Fiber ticker = tern::spawn([&] {
      while (tern::this_fiber::sleep_for(1ms)) ++ticks;
    });
    char buf[8];
    const auto start = tern::Clock::now();
    errno = 0;
    EXPECT_EQ(::recv(pair.client, buf, sizeof buf, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_GE(tern::Clock::now() - start, 100ms);
    EXPECT_GT(ticks, 0);  // the worker went on running fibers meanwhile
    ticker.interrupt();
    ticker.join();
  });
}

TEST(Hook, CloseFromAnotherFiberWakesTheParkedReader) {
  on_workers(1, [] {
    TcpPair pair;
    tern::Fiber closer = tern::spawn([&] {
      ASSERT_TRUE(tern::this_fiber::sleep_for(5ms));
      EXPECT_EQ(::close(pair.client), 0);
    });
    char buf[8];
    errno = 0;
    EXPECT_EQ(::read(pair.client, buf, sizeof buf), -1);
    EXPECT_EQ(errno, EBADF);
    closer.join();
    pair.client = -1;
  });
}

TEST(Hook, Dup2OverAParkedDescriptorWakesItsReader) {
  on_workers(1, [] {
    TcpPair pair;
    TcpPair other;
    tern::Fiber replacer = tern::spawn([&] {
      ASSERT_TRUE(tern::this_fiber::sleep_for(5ms));
      EXPECT_EQ(::dup2(other.client, pair.client), pair.client);
    });
    char buf[8];
    errno = 0;
    EXPECT_EQ(::read(pair.client, buf, sizeof buf), -1);
    EXPECT_EQ(errno, EBADF);
    replacer.join();
    // pair.client is now a copy of other.client, and works as one, blocking.
    tern::Fiber writer = tern::spawn([&] { EXPECT_EQ(::write(other.server, "dup", 3), 3); });
    EXPECT_EQ(::read(pair.client, buf, sizeof buf), 3);
    writer.join();
  });
}

TEST(Hook, AnInterruptedFiberGetsEintr) {
  on_workers(1, [] {
    TcpPair pair;
    int result = 0;
    int error = 0;
    tern::Fiber reader = tern::spawn([&] {
      char buf[8];
      result = static_cast<int>(::read(pair.client, buf, sizeof buf));
      error = errno;
    });
    tern::this_fiber::yield();
    reader.interrupt();
    reader.join();
    EXPECT_EQ(result, -1);
    EXPECT_EQ(error, EINTR);
  });
}

TEST(Hook, ConnectAndAcceptParkAndConnectReportsRefusal) {
  on_workers(1, [] {
    Listener listener;
    int accepted = -1;
    tern::Fiber acceptor = tern::spawn([&] { accepted = ::accept(listener.fd, nullptr, nullptr); });
    const int client = connect_to(listener.port);
    acceptor.join();
    EXPECT_GE(client, 0);
    EXPECT_GE(accepted, 0);
    EXPECT_EQ(::fcntl(accepted, F_GETFL) & O_NONBLOCK, 0);
    ::close(client);
    ::close(accepted);
    // A port nobody listens on: ECONNREFUSED, as libc says.
    Listener gone;
    const std::uint16_t port = gone.port;
    ::close(gone.fd);
    gone.fd = -1;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in address = hook_test::loopback(port);
    errno = 0;
    EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), -1);
    EXPECT_EQ(errno, ECONNREFUSED);
    ::close(fd);
  });
}

// poll with a ready, an idle, a closed and a negative descriptor gives libc's answers, and
// select and epoll_wait wait in the fiber too.
TEST(Hook, PollSelectAndEpollWaitAnswerLikeLibc) {
  on_workers(1, [] {
    TcpPair ready;
    TcpPair idle;
    ASSERT_EQ(::write(ready.server, "r", 1), 1);
    const int closed = ::dup(0);
    ::close(closed);
    std::array<pollfd, 4> fds = {{
        {.fd = ready.client, .events = POLLIN, .revents = 0},
        {.fd = idle.client, .events = POLLIN, .revents = 0},
        {.fd = closed, .events = POLLIN, .revents = 0},
        {.fd = -1, .events = POLLIN, .revents = 0},
    }};
    EXPECT_EQ(::poll(fds.data(), fds.size(), 1000), 2);
    EXPECT_EQ(fds[0].revents, POLLIN);
    EXPECT_EQ(fds[1].revents, 0);
    EXPECT_EQ(fds[2].revents, POLLNVAL);
    EXPECT_EQ(fds[3].revents, 0);

    // Nothing ready: the timeout passes in the fiber, 0.
    pollfd only_idle = {.fd = idle.client, .events = POLLIN, .revents = 0};
    EXPECT_EQ(::poll(&only_idle, 1, 20), 0);

    // select: wakes when the idle socket gets data from another fiber.
    tern::Fiber writer = tern::spawn([&] { EXPECT_EQ(::write(idle.server, "s", 1), 1); });
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(idle.client, &readable);
    timeval timeout = {.tv_sec = 10, .tv_usec = 0};
    EXPECT_EQ(::select(idle.client + 1, &readable, nullptr, nullptr, &timeout), 1);
    EXPECT_TRUE(FD_ISSET(idle.client, &readable));
    writer.join();
    // select on a closed descriptor: EBADF.
    FD_ZERO(&readable);
    FD_SET(closed, &readable);
    timeout = {.tv_sec = 1, .tv_usec = 0};
    errno = 0;
    EXPECT_EQ(::select(closed + 1, &readable, nullptr, nullptr, &timeout), -1);
    EXPECT_EQ(errno, EBADF);

    // epoll_wait of a library's own loop.
    const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event event = {};
    event.events = EPOLLIN;
    event.data.fd = ready.server;
    ASSERT_EQ(::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, ready.server, &event), 0);
    epoll_event got[4];
    EXPECT_EQ(::epoll_wait(epoll_fd, got, 4, 20), 0);
    tern::Fiber sender = tern::spawn([&] { EXPECT_EQ(::write(ready.client, "e", 1), 1); });
    EXPECT_EQ(::epoll_wait(epoll_fd, got, 4, 10'000), 1);
    EXPECT_EQ(got[0].data.fd, ready.server);
    sender.join();
    ::close(epoll_fd);
  });
}

TEST(Hook, SleepsAndNameLookupsDoNotHoldTheWorker) {
  on_workers(2, [] {
    hook_test::Tickers tickers;
    tern::Fiber sleeper = tern::spawn([] {
      EXPECT_EQ(::sleep(1), 0u);
      EXPECT_EQ(::usleep(100'000), 0);
      const timespec request = {.tv_sec = 0, .tv_nsec = 100'000'000};
      EXPECT_EQ(::nanosleep(&request, nullptr), 0);
    });
    tern::Fiber resolver = tern::spawn([] {
      addrinfo hints = {};
      hints.ai_family = AF_INET;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* found = nullptr;
      ASSERT_EQ(::getaddrinfo("localhost", "80", &hints, &found), 0);
      ASSERT_NE(found, nullptr);
      EXPECT_EQ(found->ai_family, AF_INET);
      ::freeaddrinfo(found);
      EXPECT_NE(::getaddrinfo("name.that.does.not.exist.invalid", nullptr, nullptr, &found), 0);
    });
    sleeper.join();
    resolver.join();
    EXPECT_LT(tickers.stop(), hook_test::kMaxLateness);
  });
}

// The control of every ticker bound: a worker blocked in a system call the hook does not see
// (a raw nanosleep) shows as a late ticker, however loaded the machine.
TEST(Hook, TickersSeeAWorkerBlockedInASystemCall) {
  on_workers(2, [] {
    hook_test::Tickers tickers;
    const timespec request = {.tv_sec = 0, .tv_nsec = 200'000'000};
    EXPECT_EQ(::syscall(SYS_nanosleep, &request, nullptr), 0);
    EXPECT_GE(tickers.stop(), 150ms);
  });
}

TEST(Hook, AnInterruptedSleepEndsWithEintr) {
  on_workers(1, [] {
    int result = 0;
    int error = 0;
    timespec left = {};
    tern::Fiber sleeper = tern::spawn([&] {
      const timespec request = {.tv_sec = 30, .tv_nsec = 0};
      result = ::nanosleep(&request, &left);
      error = errno;
    });
    tern::this_fiber::yield();
    sleeper.interrupt();
    sleeper.join();
    EXPECT_EQ(result, -1);
    EXPECT_EQ(error, EINTR);
    EXPECT_GT(left.tv_sec, 20);
  });
}

// Off the workers every call is libc's: a blocking socket blocks the thread, SO_RCVTIMEO is the
// kernel's, and a socket a fiber made (non-blocking underneath) still blocks a plain thread.
TEST(Hook, OnAPlainThreadEveryCallIsLibcs) {
  std::thread plain([] {
    EXPECT_FALSE(tern::hook::parks_fibers());
    TcpPair pair;
    ASSERT_GE(pair.client, 0);
    EXPECT_EQ(::fcntl(pair.client, F_GETFL) & O_NONBLOCK, 0);
    const timeval timeout = {.tv_sec = 0, .tv_usec = 50'000};
    ASSERT_EQ(::setsockopt(pair.client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout), 0);
    char buf[8];
    errno = 0;
    EXPECT_EQ(::read(pair.client, buf, sizeof buf), -1);
    EXPECT_EQ(errno, EAGAIN);
    // The read that waits for the writer thread has 30 s: on a busy machine the thread did not
    // write within 50 ms.
    const timeval patient = {.tv_sec = 30, .tv_usec = 0};
    ASSERT_EQ(::setsockopt(pair.client, SOL_SOCKET, SO_RCVTIMEO, &patient, sizeof patient), 0);
    std::thread writer([&] { EXPECT_EQ(::write(pair.server, "t", 1), 1); });
    EXPECT_EQ(::read(pair.server == -1 ? -1 : pair.client, buf, sizeof buf), 1);
    writer.join();
  });
  plain.join();

  int from_fiber = -1;
  Listener listener;
  on_workers(1, [&] { from_fiber = connect_to(listener.port); });
  ASSERT_GE(from_fiber, 0);
  const int server = ::accept(listener.fd, nullptr, nullptr);
  EXPECT_EQ(::fcntl(from_fiber, F_GETFL) & O_NONBLOCK, 0);
  std::thread writer([&] { EXPECT_EQ(::write(server, "late", 4), 4); });
  char buf[8];
  EXPECT_EQ(::read(from_fiber, buf, sizeof buf), 4);  // blocks, no EAGAIN
  writer.join();
  ::close(server);
  ::close(from_fiber);
}

}  // namespace
