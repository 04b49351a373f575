// tern::io on the backend named by TERN_IO (ctest runs this binary once per backend): reads and
// writes, deadlines, cancellation, close, accept/connect over loopback, offload.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/io/io.h"
#include "tern/io/offload.h"
#include "test_scale.h"

namespace {

using namespace std::chrono_literals;

// Runs fn as the first fiber of a runtime with `workers` workers and reactors.
template <typename Fn>
void on_workers(std::size_t workers, Fn&& fn) {
  tern::Runtime runtime({.workers = workers});
  runtime.run(std::forward<Fn>(fn));
}

// Two descriptors closed through tern::io when the pair goes away.
struct FdPair {
  int fds[2] = {-1, -1};
  FdPair() = default;
  FdPair(const FdPair&) = delete;
  FdPair& operator=(const FdPair&) = delete;
  ~FdPair() {
    tern::io::close(fds[0]);
    tern::io::close(fds[1]);
  }
};

// A connected pair of non-blocking Unix stream sockets.
struct SocketPair : FdPair {
  SocketPair() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  }
};

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

TEST(Backend, MatchesTheEnvironment) {
  const char* asked = std::getenv("TERN_IO");
  on_workers(1, [&] {
    const tern::io::Backend backend = tern::io::current_backend();
    if (asked != nullptr && std::string(asked) == "uring") {
      EXPECT_EQ(backend, tern::io::Backend::uring);
    } else if (asked != nullptr && std::string(asked) == "epoll") {
      EXPECT_EQ(backend, tern::io::Backend::epoll);
    }
  });
}

TEST(Backend, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(*tern::io::parse_backend("epoll"), tern::io::BackendChoice::epoll);
  EXPECT_EQ(*tern::io::parse_backend("io_uring"), tern::io::BackendChoice::uring);
  EXPECT_EQ(*tern::io::parse_backend("auto"), tern::io::BackendChoice::automatic);
  EXPECT_EQ(tern::io::parse_backend("kqueue").error(), std::errc::invalid_argument);
}

// A bad TERN_IO ends the program at the first runtime, naming the variable, its value and the
// accepted values, as every TERN_ variable does.
TEST(EnvironmentDeathTest, ABadTernIoIsFatalAndSaysWhatItAccepts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ::setenv("TERN_IO", "bogus", 1);
        on_workers(1, [] {});
      },
      "tern: TERN_IO='bogus' is not valid: expected epoll, uring or auto \\(unset means "
      "auto\\)");
}

TEST(ReadWrite, MovesBytesBetweenFibers) {
  on_workers(1, [] {
    SocketPair pair;
    std::string received;
    tern::Fiber reader = tern::spawn([&] {
      std::array<std::byte, 64> buf;
      while (received.size() < 11) {
        tern::Result<std::size_t> n = tern::io::read(pair.fds[1], buf);
        ASSERT_TRUE(n) << n.error().message();
        ASSERT_GT(*n, 0u);
        received.append(reinterpret_cast<const char*>(buf.data()), *n);
      }
    });
    tern::this_fiber::yield();  // the reader parks on an empty socket first
    ASSERT_TRUE(tern::io::write(pair.fds[0], bytes_of("hello ")));
    tern::this_fiber::yield();
    ASSERT_TRUE(tern::io::send(pair.fds[0], bytes_of("world")));
    reader.join();
    EXPECT_EQ(received, "hello world");
  });
}

TEST(ReadWrite, LargeTransferWithFullBuffersIsExact) {
  on_workers(2, [] {
    SocketPair pair;
    constexpr std::size_t kTotal = 8 << 20;
    std::uint64_t sent_sum = 0;
    std::uint64_t received_sum = 0;
    std::size_t received = 0;
    tern::Fiber writer = tern::spawn([&] {
      std::vector<std::byte> chunk(64 * 1024);
      std::size_t sent = 0;
      std::uint8_t value = 0;
      while (sent < kTotal) {
        for (std::byte& b : chunk) {
          b = std::byte{value++};
          sent_sum += static_cast<std::uint8_t>(b);
        }
        std::size_t offset = 0;
        while (offset < chunk.size()) {  // partial writes: the socket buffer is small
          tern::Result<std::size_t> n =
              tern::io::send(pair.fds[0], std::span(chunk).subspan(offset));
          ASSERT_TRUE(n) << n.error().message();
          offset += *n;
        }
        sent += chunk.size();
      }
      ::shutdown(pair.fds[0], SHUT_WR);
    });
    std::vector<std::byte> buf(10000);
    std::uint8_t expected = 0;
    for (;;) {
      tern::Result<std::size_t> n = tern::io::recv(pair.fds[1], buf);
      ASSERT_TRUE(n) << n.error().message();
      if (*n == 0) break;
      for (std::size_t i = 0; i < *n; ++i) {
        ASSERT_EQ(static_cast<std::uint8_t>(buf[i]), expected++) << "at byte " << received + i;
        received_sum += static_cast<std::uint8_t>(buf[i]);
      }
      received += *n;
    }
    writer.join();
    EXPECT_EQ(received, kTotal);
    EXPECT_EQ(received_sum, sent_sum);
  });
}

// A connected pair of non-blocking loopback TCP sockets.
struct TcpPair : FdPair {
  TcpPair() {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
    EXPECT_EQ(::listen(listener, 1), 0);
    fds[0] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(fds[0], reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    fds[1] = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(listener);
    for (int fd : fds) EXPECT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  }
};

// Reads that fill their buffer exactly make the epoll reactor ask TCP what they left queued, to
// wait for the next edge instead of failing a read with EAGAIN. Bytes already queued must still
// be read at once: messages sent two at a time, read one at a time, with some sent only after
// the reader parked.
TEST(ReadWrite, ExactReadsOverTcpReadWhatIsQueuedAndWaitForTheRest) {
  on_workers(1, [] {
    TcpPair pair;
    constexpr int kMessages = 200;
    int received = 0;
    tern::Fiber reader = tern::spawn([&] {
      std::array<std::byte, 4> message;
      for (; received < kMessages; ++received) {
        tern::Result<std::size_t> n =
            tern::io::recv(pair.fds[1], message, 0, tern::Clock::now() + 10s);
        ASSERT_TRUE(n) << "message " << received << ": " << n.error().message();
        ASSERT_EQ(*n, message.size()) << "message " << received;
        int value = 0;
        std::memcpy(&value, message.data(), sizeof value);
        ASSERT_EQ(value, received);
      }
    });
    for (int i = 0; i < kMessages; i += 2) {
      const std::array<int, 2> two = {i, i + 1};
      ASSERT_TRUE(tern::io::send(pair.fds[0], std::as_bytes(std::span(two))));
      if (i % 4 == 0) tern::this_fiber::yield();  // let the reader drain and park now and then
    }
    reader.join();
    EXPECT_EQ(received, kMessages);
  });
}

// A read shorter than its buffer empties the queue, and both backends then wait for data before
// trying the next read (epoll for the next edge, io_uring with IORING_RECVSEND_POLL_FIRST).
// Bytes that arrive between two reads must still be read at once, and bytes that arrive while
// the reader waits must wake it.
TEST(ReadWrite, ReadsAfterAShortReadTakeBytesQueuedBeforeOrAfterThem) {
  on_workers(1, [] {
    TcpPair pair;
    constexpr int kRounds = 100;
    const auto expect_value = [&](int expected) {
      std::array<std::byte, 64> buffer;
      tern::Result<std::size_t> n =
          tern::io::recv(pair.fds[1], buffer, 0, tern::Clock::now() + 10s);
      ASSERT_TRUE(n) << "value " << expected << ": " << n.error().message();
      ASSERT_EQ(*n, sizeof(int)) << "value " << expected;
      int value = -1;
      std::memcpy(&value, buffer.data(), sizeof value);
      EXPECT_EQ(value, expected);
    };
    const auto send_value = [&](int value) {
      ASSERT_TRUE(tern::io::send(pair.fds[0], std::as_bytes(std::span(&value, 1))));
    };
    for (int i = 0; i < kRounds; ++i) {  // queued before each read
      send_value(i);
      expect_value(i);
    }
    int received = 0;
    tern::Fiber reader = tern::spawn([&] {
      for (; received < kRounds; ++received) expect_value(kRounds + received);
    });
    for (int i = 0; i < kRounds; ++i) {  // sent while the reader waits
      const tern::Deadline give_up = tern::Clock::now() + 10s;
      while (received < i && tern::Clock::now() < give_up) tern::this_fiber::yield();
      ASSERT_EQ(received, i);
      tern::this_fiber::yield();  // the reader reaches its next read and parks there
      send_value(kRounds + i);
    }
    reader.join();
    EXPECT_EQ(received, kRounds);
  });
}

// A reader that parks after a short read (the queue is empty) has the next bytes received for
// it where the edge is handled on epoll, and by the kernel on io_uring. What else can end such a
// wait must reach it the same way: the peer's end of stream, a reset, a deadline, an interrupt.
// Each case parks the reader after a short read before the peer acts.
struct ParkedReader {
  TcpPair pair;
  std::error_code error;
  std::size_t got = 0;
  bool done = false;
  tern::Fiber fiber;

  // Starts the reader: one short read of "first", then a read that parks.
  explicit ParkedReader(tern::Deadline second_deadline = tern::Clock::now() + 10s) {
    EXPECT_TRUE(tern::io::send(pair.fds[0], bytes_of("first")));
    fiber = tern::spawn([this, second_deadline] {
      std::array<std::byte, 64> buffer;
      tern::Result<std::size_t> n =
          tern::io::recv(pair.fds[1], buffer, 0, tern::Clock::now() + 10s);
      EXPECT_TRUE(n && *n == 5);
      n = tern::io::recv(pair.fds[1], buffer, 0, second_deadline);
      if (n)
        got = *n;
      else
        error = n.error();
      done = true;
    });
    // Until the reader took "first" and parked in its second read.
    const tern::Deadline give_up = tern::Clock::now() + 10s;
    for (int turns = 0; turns < 4 || !queue_empty(); ++turns) {
      if (tern::Clock::now() > give_up) break;
      tern::this_fiber::yield();
    }
    EXPECT_TRUE(queue_empty()) << "the reader did not take its first message";
  }
  // Has the peer do `peer_action` while the reader is parked in its second read, then waits
  // for that read to end.
  template <typename Action>
  void end_parked_read_by(Action&& peer_action) {
    ASSERT_FALSE(done) << "the second read ended before the peer did anything";
    peer_action();
    fiber.join();
  }
  bool queue_empty() const {
    char byte;
    return ::recv(pair.fds[1], &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
  }
  // After the parked read ended: a message sent now is received whole by a new read.
  void expect_next_message_arrives() const {
    ASSERT_TRUE(tern::io::send(pair.fds[0], bytes_of("later")));
    std::array<std::byte, 64> buffer;
    tern::Result<std::size_t> n = tern::io::recv(pair.fds[1], buffer, 0, tern::Clock::now() + 10s);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(buffer.data()), *n), "later");
  }
};

TEST(ParkedRead, ReceivesBytesThatArriveLater) {
  on_workers(1, [] {
    ParkedReader reader;
    reader.end_parked_read_by(
        [&] { ASSERT_TRUE(tern::io::send(reader.pair.fds[0], bytes_of("second!"))); });
    EXPECT_FALSE(reader.error) << reader.error.message();
    EXPECT_EQ(reader.got, 7u);
  });
}

TEST(ParkedRead, SeesTheEndOfTheStream) {
  on_workers(1, [] {
    ParkedReader reader;
    reader.end_parked_read_by([&] { ASSERT_EQ(::shutdown(reader.pair.fds[0], SHUT_WR), 0); });
    EXPECT_FALSE(reader.error) << reader.error.message();
    EXPECT_EQ(reader.got, 0u);
  });
}

TEST(ParkedRead, SeesAReset) {
  on_workers(1, [] {
    ParkedReader reader;
    reader.end_parked_read_by([&] {
      const linger abort_on_close = {.l_onoff = 1, .l_linger = 0};
      ASSERT_EQ(::setsockopt(reader.pair.fds[0], SOL_SOCKET, SO_LINGER, &abort_on_close,
                             sizeof abort_on_close),
                0);
      tern::io::close(reader.pair.fds[0]);
      reader.pair.fds[0] = -1;
    });
    EXPECT_EQ(reader.error, std::errc::connection_reset) << reader.error.message();
  });
}

TEST(ParkedRead, TimesOutAndLosesNothing) {
  on_workers(1, [] {
    ParkedReader reader(tern::Clock::now() + 50ms);
    reader.fiber.join();
    EXPECT_EQ(reader.error, std::errc::timed_out);
    reader.expect_next_message_arrives();
  });
}

TEST(ParkedRead, AnInterruptEndsItAndLosesNothing) {
  on_workers(1, [] {
    ParkedReader reader;
    reader.end_parked_read_by([&] { reader.fiber.interrupt(); });
    EXPECT_EQ(reader.error, std::errc::operation_canceled);
    reader.expect_next_message_arrives();
  });
}

// Two fibers parked in reads of one socket: each message goes to exactly one of them.
TEST(ParkedRead, TwoReadersOfOneSocketShareItsMessages) {
  on_workers(1, [] {
    ParkedReader first;
    std::size_t second_got = 0;
    tern::Fiber second = tern::spawn([&] {
      std::array<std::byte, 64> buffer;
      tern::Result<std::size_t> n =
          tern::io::recv(first.pair.fds[1], buffer, 0, tern::Clock::now() + 10s);
      ASSERT_TRUE(n) << n.error().message();
      second_got = *n;
    });
    tern::this_fiber::yield();  // the second reader parks too
    ASSERT_TRUE(tern::io::send(first.pair.fds[0], bytes_of("one")));
    const tern::Deadline give_up = tern::Clock::now() + 10s;
    while (!first.done && second_got == 0 && tern::Clock::now() < give_up)
      tern::this_fiber::yield();
    ASSERT_TRUE(tern::io::send(first.pair.fds[0], bytes_of("three")));
    first.fiber.join();
    second.join();
    EXPECT_FALSE(first.error) << first.error.message();
    EXPECT_EQ(first.got + second_got, 8u);
    EXPECT_TRUE(first.got == 3 || first.got == 5) << first.got;
  });
}

TEST(Deadline, ReadTimesOutAndLosesNothing) {
  on_workers(1, [] {
    SocketPair pair;
    std::array<std::byte, 16> buf;
    const auto start = tern::Clock::now();
    tern::Result<std::size_t> n = tern::io::read(pair.fds[1], buf, tern::Clock::now() + 20ms);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_EQ(n.error().message(), "deadline exceeded");
    EXPECT_EQ(n.error().value(), ETIMEDOUT);
    EXPECT_GE(tern::Clock::now() - start, 20ms);
    ASSERT_TRUE(tern::io::write(pair.fds[0], bytes_of("after")));
    n = tern::io::read(pair.fds[1], buf, tern::Clock::now() + 30s);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf.data()), *n), "after");
  });
}

TEST(Deadline, ConnectToAnUnroutableAddressTimesOut) {
  on_workers(1, [] {
    // A listener whose backlog is full never completes further connects.
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    socklen_t length = sizeof address;
    ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
    ASSERT_EQ(::listen(listener, 0), 0);
    std::vector<int> clients;
    bool timed_out = false;
    for (int i = 0; i < 64 && !timed_out; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      clients.push_back(fd);
      tern::Result<void> connected = tern::io::connect(fd, reinterpret_cast<sockaddr*>(&address),
                                                       sizeof address, tern::Clock::now() + 50ms);
      if (!connected) {
        EXPECT_EQ(connected.error(), std::errc::timed_out) << connected.error().message();
        EXPECT_EQ(connected.error().message(), "deadline exceeded");
        timed_out = true;
      }
    }
    EXPECT_TRUE(timed_out) << "some connect beyond the backlog should have timed out";
    for (int fd : clients) tern::io::close(fd);
    tern::io::close(listener);
  });
}

TEST(Deadline, WritesAndAcceptsSayTheirDeadlinePassed) {
  on_workers(1, [] {
    SocketPair pair;
    const std::vector<std::byte> chunk(64 * 1024, std::byte{'w'});
    tern::Result<std::size_t> n;
    do {  // fills the socket buffer until a write waits past its deadline
      n = tern::io::write(pair.fds[0], chunk, tern::Clock::now() + 10ms);
    } while (n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_EQ(n.error().message(), "deadline exceeded");

    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(::listen(listener, 1), 0);
    tern::Result<int> accepted =
        tern::io::accept(listener, nullptr, nullptr, tern::Clock::now() + 10ms);
    ASSERT_FALSE(accepted);
    EXPECT_EQ(accepted.error(), std::errc::timed_out);
    EXPECT_EQ(accepted.error().message(), "deadline exceeded");
    tern::io::close(listener);
  });
}

TEST(Deadline, AnIdleTimeoutCountsFromTheWaitAndEndsItTheSameWay) {
  on_workers(1, [] {
    SocketPair pair;
    // Operations that complete at once never need the deadline.
    ASSERT_TRUE(tern::io::send(pair.fds[0], bytes_of("ping"), 0, tern::WaitLimit::idle(1ms)));
    std::array<std::byte, 4> buf;
    tern::Result<std::size_t> n = tern::io::recv(pair.fds[1], buf, 0, tern::WaitLimit::idle(1ms));
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 4u);
    // One that waits ends at the timeout, as at a deadline.
    n = tern::io::recv(pair.fds[1], buf, 0, tern::WaitLimit::idle(20ms));
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), tern::deadline_exceeded());
    n = tern::io::read(pair.fds[1], buf, tern::WaitLimit::idle(0ms));
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), tern::deadline_exceeded());
    const std::vector<std::byte> chunk(64 * 1024, std::byte{'w'});
    do {  // fills the socket buffer until a write waits past its timeout
      n = tern::io::write(pair.fds[0], chunk, tern::WaitLimit::idle(10ms));
    } while (n);
    EXPECT_EQ(n.error(), tern::deadline_exceeded());
  });
}

TEST(Deadline, ADeadlineThatAlreadyPassedFailsAtOnceTheSameWay) {
  on_workers(1, [] {
    SocketPair pair;
    std::array<std::byte, 4> buf;
    tern::Result<std::size_t> n = tern::io::recv(pair.fds[1], buf, 0, tern::Clock::now() - 1s);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_EQ(n.error().message(), "deadline exceeded");
    EXPECT_EQ(n.error(), tern::deadline_exceeded());
  });
}

TEST(Cancel, InterruptEndsAReadInFlight) {
  on_workers(1, [] {
    SocketPair pair;
    std::error_code result;
    tern::Fiber reader = tern::spawn([&] {
      std::array<std::byte, 16> buf;
      tern::Result<std::size_t> n = tern::io::read(pair.fds[1], buf);
      result = n ? std::error_code() : n.error();
    });
    tern::this_fiber::yield();
    reader.interrupt();
    reader.join();
    EXPECT_EQ(result, std::errc::operation_canceled);
  });
}

TEST(Cancel, CloseWakesEveryWaiter) {
  on_workers(1, [] {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    int woken = 0;
    std::vector<tern::Fiber> readers;
    for (int i = 0; i < 3; ++i) {
      readers.push_back(tern::spawn([&] {
        std::array<std::byte, 16> buf;
        tern::Result<std::size_t> n = tern::io::read(fds[1], buf, tern::Clock::now() + 30s);
        EXPECT_FALSE(n);
        if (!n && n.error() != std::errc::timed_out) ++woken;
      }));
    }
    tern::this_fiber::yield();
    tern::io::close(fds[1]);
    for (tern::Fiber& f : readers) f.join();
    EXPECT_EQ(woken, 3);
    tern::io::close(fds[0]);
  });
}

TEST(AcceptConnect, LoopbackEchoAcrossWorkers) {
  on_workers(2, [] {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    socklen_t length = sizeof address;
    ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
    ASSERT_EQ(::listen(listener, 128), 0);
    const int clients = tern_test::scaled(100);
    tern::WaitGroup done;
    done.add(static_cast<std::size_t>(clients));
    std::atomic<int> echoed{0};
    tern::Fiber acceptor = tern::spawn([&] {
      for (int i = 0; i < clients; ++i) {
        sockaddr_in peer = {};
        socklen_t peer_length = sizeof peer;
        tern::Result<int> fd = tern::io::accept(listener, reinterpret_cast<sockaddr*>(&peer),
                                                &peer_length, tern::Clock::now() + 30s);
        ASSERT_TRUE(fd) << fd.error().message();
        EXPECT_EQ(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        tern::spawn([fd = *fd] {
          std::array<std::byte, 256> buf;
          for (;;) {
            tern::Result<std::size_t> n = tern::io::recv(fd, buf);
            if (!n || *n == 0) break;
            ASSERT_TRUE(tern::io::send(fd, std::span(buf).first(*n)));
          }
          tern::io::close(fd);
        }).detach();
      }
    });
    for (int i = 0; i < clients; ++i) {
      ASSERT_TRUE(tern::post(static_cast<std::size_t>(i % 2), [&, i] {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        tern::Result<void> connected = tern::io::connect(fd, reinterpret_cast<sockaddr*>(&address),
                                                         sizeof address, tern::Clock::now() + 30s);
        EXPECT_TRUE(connected) << connected.error().message();
        const std::string message = "message " + std::to_string(i);
        EXPECT_TRUE(tern::io::send(fd, bytes_of(message)));
        std::string reply;
        std::array<std::byte, 256> buf;
        while (reply.size() < message.size()) {
          tern::Result<std::size_t> n = tern::io::recv(fd, buf, 0, tern::Clock::now() + 30s);
          if (!n || *n == 0) break;
          reply.append(reinterpret_cast<const char*>(buf.data()), *n);
        }
        if (reply == message) echoed++;
        tern::io::close(fd);
        done.done();
      }));
    }
    ASSERT_TRUE(done.wait_for(60s));
    acceptor.join();
    tern::io::close(listener);
    EXPECT_EQ(echoed.load(), clients);
  });
}

// With idle_poll an idle worker polls its reactor instead of sleeping in it: a read parked on
// one worker must complete when the other worker writes, found by that polling. With a 1 s
// poll a miss costs about a second a round trip; 20 of them well under 10 s show none missed.
TEST(IdlePoll, ReadsCompleteWhileTheirWorkerPolls) {
  // Polling even on busy CPUs: other tests running beside this one must not turn it off.
  tern::Runtime runtime(
      {.workers = 2, .idle_poll = std::chrono::seconds(1), .idle_poll_on_busy_cpus = true});
  constexpr int kRounds = 20;
  const auto started = std::chrono::steady_clock::now();
  runtime.run([] {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    tern::Event echoed;
    ASSERT_TRUE(tern::post(1, [&] {
      std::array<std::byte, 16> buf;
      for (int i = 0; i < kRounds; ++i) {
        tern::Result<std::size_t> n = tern::io::read(fds[1], buf, tern::Clock::now() + 30s);
        if (!n || *n != 1 || !tern::io::write(fds[1], std::span(buf).first(1))) break;
      }
      tern::io::close(fds[1]);  // on the worker that waited on it
      echoed.set();
    }));
    std::array<std::byte, 16> buf;
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_TRUE(tern::io::write(fds[0], bytes_of("x")));
      tern::Result<std::size_t> n = tern::io::read(fds[0], buf, tern::Clock::now() + 30s);
      EXPECT_TRUE(n && *n == 1) << "round " << i << ": "
                                << (n ? "end of stream" : n.error().message());
      if (!n || *n != 1) break;
    }
    ASSERT_TRUE(echoed.wait_for(30s));
    tern::io::close(fds[0]);
  });
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, 10s) << "a read completed only when its worker's poll ended";
}

TEST(Fairness, AFiberWhoseSocketsNeverBlockLetsTheOthersRun) {
  // Data is always there for this fiber, so its reads and writes never wait; the worker's other
  // fibers must still get their turn long before it is done.
  on_workers(1, [] {
    constexpr int kRounds = 20000;
    int rounds_done = 0;
    int rounds_when_other_ran = -1;
    SocketPair pair;
    tern::Fiber busy = tern::spawn([&] {
      std::array<std::byte, 64> buf{};
      for (; rounds_done < kRounds; ++rounds_done) {
        ASSERT_TRUE(tern::io::write(pair.fds[0], buf, tern::kNoDeadline));
        ASSERT_TRUE(tern::io::read(pair.fds[1], buf, tern::kNoDeadline));
      }
    });
    tern::Fiber other = tern::spawn([&] { rounds_when_other_ran = rounds_done; });
    busy.join();
    other.join();
    EXPECT_GE(rounds_when_other_ran, 0);
    EXPECT_LT(rounds_when_other_ran, kRounds / 10);
  });
}

TEST(WaitReady, ReportsReadabilityAndWritability) {
  on_workers(1, [] {
    SocketPair pair;
    ASSERT_TRUE(tern::io::wait_writable(pair.fds[0], tern::Clock::now() + 30s));
    tern::Result<void> early = tern::io::wait_readable(pair.fds[1], tern::Clock::now() + 10ms);
    ASSERT_FALSE(early);
    EXPECT_EQ(early.error(), std::errc::timed_out);
    EXPECT_EQ(early.error().message(), "deadline exceeded");
    ASSERT_TRUE(tern::io::write(pair.fds[0], bytes_of("x")));
    ASSERT_TRUE(tern::io::wait_readable(pair.fds[1], tern::Clock::now() + 30s));
  });
}

TEST(TrySend, SendsWhatFitsNeverWaitsAndReportsAClosedPeer) {
  on_workers(1, [] {
    SocketPair pair;
    tern::Result<std::size_t> first = tern::io::try_send(pair.fds[0], bytes_of("hello"));
    ASSERT_TRUE(first);
    EXPECT_EQ(*first, 5u);
    const std::vector<std::byte> chunk(64 * 1024, std::byte{'f'});
    std::size_t sent = *first;
    for (;;) {  // fills the socket buffer: the last attempt takes nothing and does not wait
      tern::Result<std::size_t> n = tern::io::try_send(pair.fds[0], chunk);
      ASSERT_TRUE(n) << n.error().message();
      if (*n == 0) break;
      sent += *n;
      ASSERT_LT(sent, std::size_t{1} << 30) << "a socket buffer that never fills";
    }
    std::array<std::byte, 5> head;
    ASSERT_TRUE(tern::io::read(pair.fds[1], head, tern::Clock::now() + 30s));
    EXPECT_EQ(std::memcmp(head.data(), "hello", 5), 0) << "the bytes sent first arrive first";

    tern::io::close(pair.fds[1]);
    pair.fds[1] = -1;
    tern::Result<std::size_t> closed = tern::io::try_send(pair.fds[0], bytes_of("x"));
    ASSERT_FALSE(closed);
    EXPECT_EQ(closed.error(), std::errc::broken_pipe) << "no SIGPIPE, an error";
  });
}

TEST(Errors, ReadFromABadDescriptorFailsWithItsErrno) {
  on_workers(1, [] {
    std::array<std::byte, 4> buf;
    tern::Result<std::size_t> n = tern::io::read(-1 + 1000000, buf, tern::Clock::now() + 1s);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::bad_file_descriptor);
  });
}

// Calling tern::io off a runtime ends the program naming the call and what to do instead.
TEST(OffRuntimeDeathTest, AReadOutsideARuntimeSaysWhereToCallIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto read_off_runtime = [] {
    SocketPair pair;
    std::array<std::byte, 4> buf;
    (void)tern::io::read(pair.fds[1], buf);
  };
  EXPECT_DEATH(
      read_off_runtime(),
      "tern: tern::io::read called outside a tern::Runtime: call it from a fiber \\(inside "
      "Runtime::run\\) \\(src/io/io\\.cc:[0-9]+\\)\n");
}

TEST(Offload, RunsElsewhereAndReturnsTheResult) {
  on_workers(1, [] {
    const std::thread::id worker = std::this_thread::get_id();
    std::thread::id ran_on;
    const int value = tern::io::offload([&] {
      ran_on = std::this_thread::get_id();
      return 6 * 7;
    });
    EXPECT_EQ(value, 42);
    EXPECT_NE(ran_on, worker);
    EXPECT_THROW(tern::io::offload([]() -> int { throw std::runtime_error("offloaded"); }),
                 std::runtime_error);
  });
}

TEST(Offload, ManyFibersWaitWhileTheWorkerKeepsRunning) {
  on_workers(1, [] {
    // The offloaded jobs block until the worker's own fiber has run while they were pending:
    // if offload blocked the worker, they could never finish.
    tern::Event worker_ran;
    std::atomic<int> done{0};
    tern::WaitGroup group;
    group.add(16);
    for (int i = 0; i < 16; ++i) {
      tern::spawn([&] {
        tern::io::offload([&] {
          while (!worker_ran.is_set()) std::this_thread::yield();  // blocking work
        });
        done++;
        group.done();
      }).detach();
    }
    tern::this_fiber::yield();  // every fiber has handed its job to the pool and parked
    EXPECT_EQ(done.load(), 0);
    worker_ran.set();
    ASSERT_TRUE(group.wait_for(30s));
    EXPECT_EQ(done.load(), 16);
  });
}

}  // namespace
