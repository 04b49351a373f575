// Shared-stack fibers (FiberOptions::stack_mode = StackMode::shared) on the backend named by
// TERN_IO (ctest runs this binary once per backend): many of them share one worker's stack, and
// each keeps its own frames across sleeps, channel, mutex, event, condition variable, join,
// select and socket waits, while other fibers hand values to them or wake them.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/channel.h"
#include "tern/fiber/condition_variable.h"
#include "tern/fiber/event.h"
#include "tern/fiber/mutex.h"
#include "tern/fiber/sanitizer.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/offload.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_server.h"
#include "tern/net/tcp_stream.h"
#include "yields_until_post_runs.h"

namespace {

using namespace std::chrono_literals;
using tern_test::patience;
using tern_test::run_on;

constexpr std::size_t kFibers = 64;
const tern::FiberOptions kShared{.name = "shared", .stack_mode = tern::StackMode::shared};

// Fills a stack array of `Size` bytes with a pattern of `seed`, runs wait(), and returns whether
// the array still holds the pattern: the fiber's frames survived being copied out and back.
template <std::size_t Size, typename Wait>
bool frames_survive(std::uint32_t seed, Wait&& wait) {
  std::array<unsigned char, Size> bytes;
  for (std::size_t i = 0; i < Size; ++i) bytes[i] = static_cast<unsigned char>(seed * 31 + i);
  wait();
  for (std::size_t i = 0; i < Size; ++i)
    if (bytes[i] != static_cast<unsigned char>(seed * 31 + i)) return false;
  return true;
}

TEST(SharedStack, ManyFibersSleepAndKeepTheirFrames) {
  run_on(1, [] {
    std::atomic<std::size_t> intact{0};
    std::vector<tern::Fiber> fibers;
    for (std::uint32_t i = 0; i < 4 * kFibers; ++i) {
      fibers.push_back(tern::spawn(
          [i, &intact] {
            const auto nap = [i] {
              for (int round = 0; round < 3; ++round) {
                ASSERT_TRUE(tern::this_fiber::sleep_for(std::chrono::microseconds(50 + i % 7)));
                tern::this_fiber::yield();
              }
            };
            // Different depths: some fibers use far more of the shared stack than others.
            const bool ok = i % 3 == 0   ? frames_survive<256>(i, nap)
                            : i % 3 == 1 ? frames_survive<2048>(i, nap)
                                         : frames_survive<16384>(i, nap);
            if (ok) intact.fetch_add(1);
          },
          kShared));
    }
    for (tern::Fiber& fiber : fibers) fiber.join();
    EXPECT_EQ(intact.load(), 4 * kFibers);
  });
}

TEST(SharedStack, ChannelHandsValuesToAndFromParkedFibers) {
  run_on(1, [] {
    tern::Channel<std::string> to_shared(1);    // receivers park first: sends meet them
    tern::Channel<std::string> from_shared(1);  // one slot: senders park on a full channel
    std::vector<tern::Fiber> fibers;
    std::atomic<std::size_t> intact{0};
    for (std::uint32_t i = 0; i < kFibers; ++i) {
      fibers.push_back(tern::spawn(
          [&, i] {
            std::string received;
            const bool ok = frames_survive<1024>(i, [&] {
              tern::Result<std::string> value = to_shared.recv_until(patience());
              ASSERT_TRUE(value);
              received = std::move(*value);
              ASSERT_TRUE(from_shared.send_until("echo " + received, patience()));
            });
            if (ok) intact.fetch_add(1);
          },
          kShared));
    }
    std::vector<std::string> echoed;
    tern::Fiber sender = tern::spawn([&] {
      for (std::size_t i = 0; i < kFibers; ++i)
        ASSERT_TRUE(to_shared.send_until("value " + std::to_string(i), patience()));
    });
    for (std::size_t i = 0; i < kFibers; ++i) {
      tern::Result<std::string> value = from_shared.recv_until(patience());
      ASSERT_TRUE(value);
      echoed.push_back(std::move(*value));
    }
    sender.join();
    for (tern::Fiber& fiber : fibers) fiber.join();
    EXPECT_EQ(intact.load(), kFibers);
    std::sort(echoed.begin(), echoed.end());
    std::vector<std::string> expected;
    for (std::size_t i = 0; i < kFibers; ++i) expected.push_back("echo value " + std::to_string(i));
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(echoed, expected);
  });
}

TEST(SharedStack, SharedFibersTalkToEachOther) {
  run_on(1, [] {
    tern::Channel<int> ping(1);
    tern::Channel<int> pong(1);
    constexpr int kRounds = 200;
    tern::Fiber a = tern::spawn(
        [&] {
          for (int i = 0; i < kRounds; ++i) {
            ASSERT_TRUE(ping.send_until(i, patience()));
            tern::Result<int> back = pong.recv_until(patience());
            ASSERT_TRUE(back);
            EXPECT_EQ(*back, i + 1);
          }
        },
        kShared);
    tern::Fiber b = tern::spawn(
        [&] {
          for (int i = 0; i < kRounds; ++i) {
            tern::Result<int> got = ping.recv_until(patience());
            ASSERT_TRUE(got);
            ASSERT_TRUE(pong.send_until(*got + 1, patience()));
          }
        },
        kShared);
    a.join();
    b.join();
  });
}

TEST(SharedStack, YieldersKeepTheirFramesAndLeaveTheWorkerLoopItsTurn) {
  // Once a worker has shared-stack fibers, every yield and wait takes the switch budget's slow
  // path, which counts the switches itself: the loop still gets its turn once in 64 switches
  // (a posted task runs within 34 yields of two busy yielders), and a yielder on the shared
  // stack and one on its own stack keep their frames.
  run_on(1, [] {
    bool stop = false;
    int yields = -1;
    bool frames_kept[2] = {false, false};
    tern::Fiber shared = tern::spawn(
        [&] {
          frames_kept[0] = frames_survive<512>(7, [&stop] {
            while (!stop) tern::this_fiber::yield();
          });
        },
        kShared);
    tern::Fiber own = tern::spawn([&] {
      frames_kept[1] = frames_survive<512>(9, [&] {
        tern::this_fiber::yield();  // the shared fiber is up and yielding
        yields = tern_test::yields_until_post_runs();
      });
      stop = true;
    });
    own.join();
    stop = true;
    shared.join();
    EXPECT_GE(yields, 0) << "the posted task did not run";
    EXPECT_LE(yields, 34) << "the loop's turn came late";
    EXPECT_TRUE(frames_kept[0]);
    EXPECT_TRUE(frames_kept[1]);
  });
}

TEST(SharedStack, SelectWakesAParkedSharedFiber) {
  run_on(1, [] {
    tern::Channel<int> numbers(1);
    tern::Channel<std::string> words(1);
    std::vector<std::string> seen;
    tern::Fiber chooser = tern::spawn(
        [&] {
          for (int i = 0; i < 2; ++i) {
            auto got = tern::select(numbers, words, patience());
            ASSERT_TRUE(got);
            seen.push_back(got->index() == 0 ? std::to_string(std::get<0>(*got))
                                             : std::get<1>(*got));
          }
        },
        kShared);
    tern::this_fiber::yield();  // the chooser parks in select (one worker: it runs now)
    ASSERT_TRUE(words.send_until("word", patience()));
    tern::this_fiber::yield();  // it takes the word and parks again
    ASSERT_TRUE(numbers.send_until(7, patience()));
    chooser.join();
    EXPECT_EQ(seen, (std::vector<std::string>{"word", "7"}));
  });
}

TEST(SharedStack, MutexEventConditionVariableAndJoin) {
  run_on(1, [] {
    tern::Mutex mutex;
    tern::ConditionVariable changed;
    tern::Event go;
    std::size_t counter = 0;
    std::size_t arrived = 0;
    std::atomic<std::size_t> intact{0};
    std::vector<tern::Fiber> fibers;
    for (std::uint32_t i = 0; i < kFibers; ++i) {
      fibers.push_back(tern::spawn(
          [&, i] {
            const bool ok = frames_survive<512>(i, [&] {
              ASSERT_TRUE(go.wait_until(patience()));
              for (int round = 0; round < 4; ++round) {
                std::unique_lock lock(mutex);
                const std::size_t seen = counter;
                tern::this_fiber::yield();  // others now queue on the held mutex
                counter = seen + 1;
              }
              std::unique_lock lock(mutex);
              ++arrived;
              changed.notify_all();
              while (arrived < kFibers) ASSERT_TRUE(changed.wait_until(lock, patience()));
            });
            if (ok) intact.fetch_add(1);
          },
          kShared));
    }
    tern::this_fiber::yield();  // every fiber now waits on the event
    go.set();
    // A shared fiber joins the others: its join waiter must sit where they can reach it.
    tern::Fiber joiner = tern::spawn(
        [&] {
          for (tern::Fiber& fiber : fibers) fiber.join();
        },
        kShared);
    joiner.join();
    EXPECT_EQ(counter, 4 * kFibers);
    EXPECT_EQ(intact.load(), kFibers);
  });
}

TEST(SharedStack, SocketReadsIntoStackBuffersWhileParked) {
  run_on(1, [] {
    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(tern::net::Address::loopback(0));
    ASSERT_TRUE(listener);
    tern::Result<tern::net::Address> address = listener->local_address();
    ASSERT_TRUE(address);
    std::vector<tern::net::TcpStream> clients;
    std::vector<tern::Fiber> readers;
    tern::WaitGroup reading;
    reading.add(kFibers);
    std::atomic<std::size_t> matched{0};
    for (std::size_t i = 0; i < kFibers; ++i) {
      tern::Result<tern::net::TcpStream> client =
          tern::net::TcpStream::connect(*address, patience());
      ASSERT_TRUE(client);
      clients.push_back(std::move(*client));
      tern::Result<tern::net::TcpStream> accepted = listener->accept(patience());
      ASSERT_TRUE(accepted);
      readers.push_back(tern::spawn(
          [&, i, stream = std::move(*accepted)]() mutable {
            // The buffer is on the shared stack: the kernel must not be handed it to fill later.
            std::array<std::byte, 64> buf{};
            reading.done();
            tern::Result<std::size_t> n = stream.read(buf, patience());
            ASSERT_TRUE(n);
            const std::string text(reinterpret_cast<const char*>(buf.data()), *n);
            if (text == "hello " + std::to_string(i)) matched.fetch_add(1);
            ASSERT_TRUE(stream.write_all(std::span<const std::byte>(buf.data(), *n), patience()));
          },
          kShared));
    }
    ASSERT_TRUE(reading.wait_until(patience()));
    for (std::size_t i = 0; i < kFibers; ++i) {
      const std::string text = "hello " + std::to_string(i);
      ASSERT_TRUE(clients[i].write_all(tern_test::bytes_of(text), patience()));
    }
    for (std::size_t i = 0; i < kFibers; ++i) {
      std::array<std::byte, 64> back{};
      tern::Result<std::size_t> n = clients[i].read(back, patience());
      ASSERT_TRUE(n);
      EXPECT_EQ(tern_test::text_of(std::span(back.data(), *n)), "hello " + std::to_string(i));
    }
    for (tern::Fiber& reader : readers) reader.join();
    EXPECT_EQ(matched.load(), kFibers);
  });
}

// offload's callable sees the caller's locals: from a shared-stack fiber it runs on the worker.
TEST(SharedStack, OffloadSeesTheCallersLocals) {
  run_on(1, [] {
    std::string result;
    tern::Fiber fiber = tern::spawn(
        [&] {
          const std::string local = "local to the shared stack";
          result = tern::io::offload([&] { return local + ", seen by offload"; });
        },
        kShared);
    fiber.join();
    EXPECT_EQ(result, "local to the shared stack, seen by offload");
  });
}

// A TcpServer whose connection fibers run on the shared stack, on two workers (connections
// handed across workers too): idle connections park in a read, then each echoes once.
TEST(SharedStack, ServerHoldsIdleConnectionsOnTheSharedStack) {
  static constexpr std::size_t kConnections = 200;
  run_on(2, [] {
    for (const tern::net::AcceptMode mode :
         {tern::net::AcceptMode::round_robin, tern::net::AcceptMode::reuse_port}) {
      tern::net::TcpServer server(
          {.accept_mode = mode, .stack_mode = tern::StackMode::shared},
          [](tern::net::TcpStream& stream) {
            std::array<std::byte, 128> buf;  // on the shared stack
            for (;;) {
              tern::Result<std::size_t> n = stream.read(buf);
              if (!n || *n == 0) return;
              if (!stream.write_all(std::span<const std::byte>(buf.data(), *n))) return;
            }
          });
      tern::Result<tern::net::Address> bound = server.start(tern::net::Address::loopback(0));
      ASSERT_TRUE(bound);
      std::vector<tern::net::TcpStream> clients;
      for (std::size_t i = 0; i < kConnections; ++i) {
        tern::Result<tern::net::TcpStream> client =
            tern::net::TcpStream::connect(*bound, patience());
        ASSERT_TRUE(client);
        clients.push_back(std::move(*client));
      }
      ASSERT_TRUE(tern_test::wait_until_condition(
          [&] { return server.stats().open == kConnections; }, patience()));
      for (std::size_t i = 0; i < kConnections; ++i) {
        const std::string text = "idle " + std::to_string(i);
        ASSERT_TRUE(clients[i].write_all(tern_test::bytes_of(text), patience()));
      }
      for (std::size_t i = 0; i < kConnections; ++i) {
        std::array<std::byte, 128> back{};
        std::size_t got = 0;
        const std::string text = "idle " + std::to_string(i);
        while (got < text.size()) {
          tern::Result<std::size_t> n =
              clients[i].read(std::span(back.data() + got, back.size() - got), patience());
          ASSERT_TRUE(n);
          ASSERT_GT(*n, 0u);
          got += *n;
        }
        EXPECT_EQ(tern_test::text_of(std::span(back.data(), got)), text);
      }
      // Stopping with no grace cuts every connection while its fiber is parked in a read.
      EXPECT_EQ(server.stop(tern::Clock::now()), kConnections);
      EXPECT_EQ(server.stats().accepted, kConnections);
      EXPECT_EQ(server.stats().open, 0u);
    }
  });
}

#if TERN_DEBUG_CHECKS && !TERN_ASAN
// A pointer into a parked shared-stack fiber's frames reads scrubbed bytes in debug builds, not
// the values it had: the mistake shows instead of working by chance.
TEST(SharedStack, DebugBuildsScrubAParkedFibersFrames) {
  run_on(1, [] {
    volatile std::uint64_t* escaped = nullptr;
    tern::Event parked;
    tern::Event resume;
    tern::Fiber fiber = tern::spawn(
        [&] {
          volatile std::uint64_t local = 0x1122334455667788;
          escaped = &local;
          parked.set();
          ASSERT_TRUE(resume.wait_until(patience()));
          EXPECT_EQ(local, 0x1122334455667788u);  // its own copy came back
        },
        kShared);
    ASSERT_TRUE(parked.wait_until(patience()));
    EXPECT_EQ(*escaped, 0xdbdbdbdbdbdbdbdbu);
    resume.set();
    fiber.join();
  });
}
#endif

}  // namespace
