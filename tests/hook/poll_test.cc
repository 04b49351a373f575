// tern::io::poll on the backend named by TERN_IO (ctest runs this binary once per backend):
// poll(2)'s answers for ready, idle, closed and negative descriptors, many descriptors at once,
// waking when one becomes ready, deadlines and interrupts.
#include "tern/io/poll.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <thread>
#include <vector>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/io.h"

namespace {

using namespace std::chrono_literals;

template <typename Fn>
void on_worker(Fn&& fn) {
  tern::Runtime runtime({.workers = 1});
  runtime.run(std::forward<Fn>(fn));
}

// A connected pair of Unix stream sockets (blocking: poll does not care), closed through
// tern::io.
struct SocketPair {
  int fds[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
  ~SocketPair() {
    tern::io::close(fds[0]);
    tern::io::close(fds[1]);
  }
};

void send_byte(int fd) { ASSERT_EQ(::send(fd, "x", 1, MSG_DONTWAIT), 1); }

// A descriptor number that is not open in this process.
int closed_fd() {
  const int fd = ::dup(0);
  EXPECT_GE(fd, 0);
  ::close(fd);
  return fd;
}

TEST(Poll, AnswersLikePollForReadyIdleClosedAndNegativeDescriptors) {
  on_worker([] {
    SocketPair ready;
    SocketPair idle;
    send_byte(ready.fds[0]);
    const int closed = closed_fd();
    std::array<pollfd, 5> fds = {{
        {.fd = ready.fds[1], .events = POLLIN, .revents = 0},
        {.fd = idle.fds[1], .events = POLLIN, .revents = 0},
        {.fd = closed, .events = POLLIN, .revents = 0},
        {.fd = -1, .events = POLLIN, .revents = 0},
        {.fd = idle.fds[0], .events = POLLOUT, .revents = 0},
    }};
    std::array<pollfd, 5> expected = fds;
    ASSERT_EQ(::poll(expected.data(), expected.size(), 0), 3);  // libc's answer, not waiting

    tern::Result<int> n = tern::io::poll(fds, tern::deadline_after(5s));
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 3);
    for (std::size_t i = 0; i < fds.size(); ++i)
      EXPECT_EQ(fds[i].revents, expected[i].revents) << "entry " << i;
    EXPECT_EQ(fds[0].revents, POLLIN);
    EXPECT_EQ(fds[1].revents, 0);
    EXPECT_EQ(fds[2].revents, POLLNVAL);
    EXPECT_EQ(fds[3].revents, 0);
    EXPECT_EQ(fds[4].revents, POLLOUT);
  });
}

TEST(Poll, ReturnsZeroAtTheDeadline) {
  on_worker([] {
    SocketPair idle;
    std::array<pollfd, 2> fds = {{
        {.fd = idle.fds[0], .events = POLLIN, .revents = 0},
        {.fd = idle.fds[1], .events = POLLIN | POLLPRI, .revents = 0},
    }};
    const auto start = tern::Clock::now();
    tern::Result<int> n = tern::io::poll(fds, tern::deadline_after(50ms));
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 0);
    EXPECT_GE(tern::Clock::now() - start, 50ms);
    EXPECT_EQ(fds[0].revents, 0);
    EXPECT_EQ(fds[1].revents, 0);
  });
}

// One waiter over many descriptors wakes when one of them, any one, becomes ready; the others
// stay without events. The single-descriptor and the set paths both.
TEST(Poll, WakesWhenOneOfManyBecomesReady) {
  on_worker([] {
    for (const int count : {1, 2, 200}) {
      std::vector<std::unique_ptr<SocketPair>> pairs;
      std::vector<pollfd> fds;
      for (int i = 0; i < count; ++i) {
        pairs.push_back(std::make_unique<SocketPair>());
        fds.push_back({.fd = pairs.back()->fds[1], .events = POLLIN, .revents = 0});
      }
      const int chosen = count / 2;
      bool parked = false;
      tern::Fiber writer = tern::spawn([&] {
        parked = true;
        send_byte(pairs[chosen]->fds[0]);
      });
      tern::Result<int> n = tern::io::poll(fds, tern::deadline_after(10s));
      writer.join();
      EXPECT_TRUE(parked);
      ASSERT_TRUE(n) << n.error().message();
      EXPECT_EQ(*n, 1) << count << " descriptors";
      for (int i = 0; i < count; ++i)
        EXPECT_EQ(fds[i].revents, i == chosen ? POLLIN : 0)
            << "descriptor " << i << " of " << count;
    }
  });
}

TEST(Poll, ReadAndWriteInterestOnOneDescriptor) {
  on_worker([] {
    SocketPair pair;
    std::array<pollfd, 1> fds = {{{.fd = pair.fds[0], .events = POLLIN | POLLOUT, .revents = 0}}};
    tern::Result<int> n = tern::io::poll(fds, tern::deadline_after(5s));
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, 1);
    EXPECT_EQ(fds[0].revents, POLLOUT);
  });
}

TEST(Poll, SeesAHangUp) {
  on_worker([] {
    SocketPair pair;
    std::array<pollfd, 1> fds = {{{.fd = pair.fds[1], .events = POLLIN, .revents = 0}}};
    tern::Fiber closer = tern::spawn([&] {
      tern::io::close(pair.fds[0]);
      pair.fds[0] = -1;
    });
    tern::Result<int> n = tern::io::poll(fds, tern::deadline_after(10s));
    closer.join();
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, 1);
    EXPECT_NE(fds[0].revents & (POLLIN | POLLHUP), 0);
  });
}

TEST(Poll, InterruptEndsTheWait) {
  on_worker([] {
    SocketPair idle;
    std::error_code result;
    tern::Fiber waiter = tern::spawn([&] {
      std::array<pollfd, 2> fds = {{
          {.fd = idle.fds[0], .events = POLLIN, .revents = 0},
          {.fd = idle.fds[1], .events = POLLIN, .revents = 0},
      }};
      tern::Result<int> n = tern::io::poll(fds);
      result = n ? std::error_code() : n.error();
    });
    tern::this_fiber::yield();
    waiter.interrupt();
    waiter.join();
    EXPECT_EQ(result, std::errc::operation_canceled);
  });
}

TEST(Poll, OtherFibersRunWhileItWaits) {
  on_worker([] {
    SocketPair idle;
    int ticks = 0;
    tern::Fiber ticker = tern::spawn([&] {
      for (; ticks < 5; ++ticks) ASSERT_TRUE(tern::this_fiber::sleep_for(1ms));
      send_byte(idle.fds[0]);
    });
    std::array<pollfd, 1> fds = {{{.fd = idle.fds[1], .events = POLLIN, .revents = 0}}};
    tern::Result<int> n = tern::io::poll(fds, tern::deadline_after(10s));
    ticker.join();
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, 1);
    EXPECT_EQ(ticks, 5);
  });
}

TEST(Poll, OnReactorWorkerIsTrueOnlyOnWorkers) {
  EXPECT_FALSE(tern::io::on_reactor_worker());
  on_worker([] { EXPECT_TRUE(tern::io::on_reactor_worker()); });
  std::thread plain([] { EXPECT_FALSE(tern::io::on_reactor_worker()); });
  plain.join();
}

}  // namespace
