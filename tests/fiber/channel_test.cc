// tern::Channel and tern::select: FIFO order, bounded senders that wait, unbounded channels,
// try_send/try_recv, deadlines, interruption, close, ranged receive, select over two
// channels, many producers and consumers across workers, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <tern/fiber/channel.h>
#include <tern/fiber/event.h>
#include <tern/fiber/fiber.h>
#include <tern/fiber/mutex.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/wait_group.h>

#include "sync_test_util.h"

namespace {

using namespace tern_test;

template <typename T>
std::error_code error_of(const tern::Result<T>& result) {
  return result ? std::error_code{} : result.error();
}

const std::error_code kClosed = tern::Errc::closed;
const std::error_code kTryAgain = std::make_error_code(std::errc::resource_unavailable_try_again);
const std::error_code kTimedOut = tern::deadline_exceeded();
const std::error_code kCancelled = std::make_error_code(std::errc::operation_canceled);

// ---- try_send / try_recv (no runtime needed) ----

TEST(Channel, TrySendAndTryRecvKeepFifoOrderUpToTheCapacity) {
  tern::Channel<int> channel(3);
  EXPECT_EQ(error_of(channel.try_recv()), kTryAgain);
  EXPECT_TRUE(channel.try_send(1));
  EXPECT_TRUE(channel.try_send(2));
  EXPECT_TRUE(channel.try_send(3));
  EXPECT_EQ(channel.size(), 3u);
  EXPECT_EQ(error_of(channel.try_send(4)), kTryAgain);
  EXPECT_EQ(channel.size(), 3u);
  EXPECT_EQ(channel.try_recv(), 1);
  EXPECT_TRUE(channel.try_send(4));
  EXPECT_EQ(channel.try_recv(), 2);
  EXPECT_EQ(channel.try_recv(), 3);
  EXPECT_EQ(channel.try_recv(), 4);
  EXPECT_EQ(error_of(channel.try_recv()), kTryAgain);
  EXPECT_EQ(channel.size(), 0u);
  EXPECT_FALSE(channel.closed());
}

TEST(Channel, FailedTrySendLeavesTheValueWithTheCaller) {
  tern::Channel<std::unique_ptr<int>> channel(1);
  auto first = std::make_unique<int>(1);
  auto second = std::make_unique<int>(2);
  EXPECT_TRUE(channel.try_send(std::move(first)));
  EXPECT_EQ(first, nullptr);
  EXPECT_EQ(error_of(channel.try_send(std::move(second))), kTryAgain);
  ASSERT_NE(second, nullptr);  // not moved from on failure
  EXPECT_EQ(*second, 2);
  channel.close();
  EXPECT_EQ(error_of(channel.try_send(std::move(second))), kClosed);
  ASSERT_NE(second, nullptr);
  tern::Result<std::unique_ptr<int>> received = channel.try_recv();
  ASSERT_TRUE(received);
  EXPECT_EQ(**received, 1);
}

TEST(Channel, UnboundedNeverRefusesASend) {
  tern::Channel<int> channel(tern::Channel<int>::kUnbounded);
  constexpr int kCount = 100000;
  for (int i = 0; i < kCount; ++i) ASSERT_TRUE(channel.try_send(int{i}));
  EXPECT_EQ(channel.size(), std::size_t{kCount});
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(channel.try_recv(), i);
  EXPECT_EQ(error_of(channel.try_recv()), kTryAgain);
}

TEST(Channel, CloseFailsSendsAndDrainsBeforeReportingClosed) {
  tern::Channel<std::string> channel(4);
  EXPECT_TRUE(channel.try_send("a"));
  EXPECT_TRUE(channel.try_send("b"));
  channel.close();
  channel.close();  // idempotent
  EXPECT_TRUE(channel.closed());
  EXPECT_EQ(error_of(channel.try_send("c")), kClosed);
  EXPECT_EQ(channel.size(), 2u);
  EXPECT_EQ(channel.try_recv(), "a");
  EXPECT_EQ(channel.try_recv(), "b");
  EXPECT_EQ(error_of(channel.try_recv()), kClosed);
  EXPECT_EQ(error_of(channel.try_recv()), kClosed);
}

// ---- blocking send / recv ----

TEST(Channel, BlockingSendAndRecvInOneFiber) {
  tern::Channel<int> channel(2);
  run(1, [&] {
    EXPECT_TRUE(channel.send(1));
    EXPECT_TRUE(channel.send_for(2, kShort));
    EXPECT_EQ(channel.recv(), 1);
    EXPECT_EQ(channel.recv_for(kShort), 2);
    // Deadlines already passed still succeed when no wait is needed.
    EXPECT_TRUE(channel.send_until(3, tern::Clock::now() - 1s));
    EXPECT_EQ(channel.recv_until(tern::Clock::now() - 1s), 3);
  });
}

TEST(Channel, BoundedSendWaitsWhileFull) {
  tern::Channel<int> channel(2);
  int sent = 0;
  std::vector<int> received;
  run(1, [&] {
    tern::Fiber sender = tern::spawn([&] {
      for (int i = 0; i < 6; ++i) {
        if (!channel.send_for(int{i}, kLong)) return;
        ++sent;
      }
    });
    tern::this_fiber::yield();
    EXPECT_EQ(sent, 2);  // the third send waits for room
    EXPECT_EQ(channel.size(), 2u);
    // Each receive makes room for one more: the waiting sender's value joins the buffer.
    received.push_back(*channel.recv());
    EXPECT_EQ(channel.size(), 2u);
    tern::this_fiber::yield();
    EXPECT_EQ(sent, 3);
    while (received.size() < 6) {
      tern::Result<int> value = channel.recv_for(kLong);
      ASSERT_TRUE(value);
      received.push_back(*value);
    }
    sender.join();
  });
  EXPECT_EQ(sent, 6);
  EXPECT_EQ(received, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(Channel, WaitingSendersAreServedInArrivalOrder) {
  tern::Channel<int> channel(1);
  std::vector<int> received;
  run(1, [&] {
    EXPECT_TRUE(channel.send(0));
    std::vector<tern::Fiber> senders;
    for (int i = 1; i <= 4; ++i) {
      senders.push_back(tern::spawn([&, i] { EXPECT_TRUE(channel.send_for(int{i}, kLong)); }));
      tern::this_fiber::yield();
    }
    for (int i = 0; i <= 4; ++i) received.push_back(*channel.recv_for(kLong));
    for (tern::Fiber& sender : senders) sender.join();
  });
  EXPECT_EQ(received, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Channel, RecvWaitsForASendAndReceiversAreServedInOrder) {
  tern::Channel<int> channel(4);
  std::vector<std::pair<int, int>> got;  // (receiver, value)
  run(1, [&] {
    std::vector<tern::Fiber> receivers;
    for (int r = 0; r < 3; ++r) {
      receivers.push_back(tern::spawn([&, r] {
        tern::Result<int> value = channel.recv_for(kLong);
        EXPECT_TRUE(value);
        if (value) got.emplace_back(r, *value);
      }));
      tern::this_fiber::yield();
    }
    EXPECT_TRUE(got.empty());
    for (int i = 10; i < 13; ++i) EXPECT_TRUE(channel.send(int{i}));
    // Values went straight to the waiting receivers, not into the buffer.
    EXPECT_EQ(channel.size(), 0u);
    for (tern::Fiber& receiver : receivers) receiver.join();
  });
  EXPECT_EQ(got, (std::vector<std::pair<int, int>>{{0, 10}, {1, 11}, {2, 12}}));
}

TEST(Channel, TrySendHandsAValueToAWaitingReceiver) {
  tern::Channel<int> channel(1);
  tern::Result<int> received = tern::fail(std::errc::io_error);
  run(1, [&] {
    tern::Fiber receiver = tern::spawn([&] { received = channel.recv_for(kLong); });
    tern::this_fiber::yield();
    EXPECT_TRUE(channel.try_send(42));
    receiver.join();
  });
  EXPECT_EQ(received, 42);
}

TEST(Channel, TryRecvTakesAWaitingSendersValue) {
  tern::Channel<int> channel(1);
  std::error_code sent{std::make_error_code(std::errc::io_error)};
  run(1, [&] {
    EXPECT_TRUE(channel.send(1));
    tern::Fiber sender = tern::spawn([&] { sent = error_of(channel.send_for(2, kLong)); });
    tern::this_fiber::yield();
    EXPECT_EQ(channel.try_recv(), 1);
    sender.join();
    EXPECT_EQ(sent, std::error_code{});
    EXPECT_EQ(channel.try_recv(), 2);
  });
}

TEST(Channel, UnboundedSendsNeverWait) {
  tern::Channel<int> channel(tern::Channel<int>::kUnbounded);
  long sum = 0;
  run(2, [&] {
    for (int i = 0; i < kStressOps; ++i)
      ASSERT_TRUE(channel.send_until(int{i}, tern::Clock::now()));
    EXPECT_EQ(channel.size(), std::size_t{kStressOps});
    channel.close();
    for (int& value : channel) sum += value;
  });
  EXPECT_EQ(sum, long{kStressOps} * (kStressOps - 1) / 2);
}

TEST(Channel, MoveOnlyValues) {
  tern::Channel<std::unique_ptr<int>> channel(2);
  int total = 0;
  run(1, [&] {
    tern::Fiber sender = tern::spawn([&] {
      for (int i = 1; i <= 5; ++i) EXPECT_TRUE(channel.send(std::make_unique<int>(i)));
      channel.close();
    });
    for (std::unique_ptr<int>& value : channel) total += *value;
    sender.join();
  });
  EXPECT_EQ(total, 15);
}

// ---- deadlines ----

TEST(Channel, RecvForTimesOutOnAnEmptyChannel) {
  tern::Channel<int> channel(1);
  run(1, [&] {
    const auto start = tern::Clock::now();
    const std::error_code result = error_of(channel.recv_for(kShort));
    const auto elapsed = since(start);
    EXPECT_EQ(result, kTimedOut);
    EXPECT_TRUE(is_deadline(result));
    EXPECT_GE(elapsed, kShort);
    EXPECT_TRUE(is_deadline(error_of(channel.recv_until(tern::Clock::now() - 1s))));
    // The timed-out receiver left no trace: a send buffers the value for the next receive.
    EXPECT_TRUE(channel.try_send(5));
    EXPECT_EQ(channel.size(), 1u);
    EXPECT_EQ(channel.recv(), 5);
  });
}

TEST(Channel, SendForTimesOutOnAFullChannel) {
  tern::Channel<int> channel(1);
  run(1, [&] {
    EXPECT_TRUE(channel.send(1));
    const auto start = tern::Clock::now();
    const std::error_code result = error_of(channel.send_for(2, kShort));
    const auto elapsed = since(start);
    EXPECT_TRUE(is_deadline(result));
    EXPECT_GE(elapsed, kShort);
    EXPECT_TRUE(is_deadline(error_of(channel.send_until(3, tern::Clock::now() - 1s))));
    // The timed-out values were not delivered and the timed-out senders are gone.
    EXPECT_EQ(channel.try_recv(), 1);
    EXPECT_EQ(error_of(channel.try_recv()), kTryAgain);
  });
}

// ---- close ----

TEST(Channel, CloseWakesWaitingReceiversOnBothWorkers) {
  constexpr int kReceivers = 6;
  tern::Channel<int> channel(2);
  tern::WaitGroup started;
  tern::WaitGroup group;
  std::atomic<int> closed{0};
  run(2, [&] {
    started.add(kReceivers);
    for (int r = 0; r < kReceivers; ++r) {
      post_counted(r % 2, group, [&] {
        started.done();
        if (error_of(channel.recv_for(kLong)) == kClosed) ++closed;
      });
    }
    ASSERT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
    channel.close();
    wait_all(group);
  });
  EXPECT_EQ(closed.load(), kReceivers);
}

TEST(Channel, CloseWakesWaitingSendersWithClosed) {
  constexpr int kSenders = 4;
  tern::Channel<int> channel(2);
  tern::WaitGroup started;
  tern::WaitGroup group;
  std::atomic<int> closed{0};
  std::atomic<int> delivered{0};
  std::vector<int> drained;
  run(2, [&] {
    EXPECT_TRUE(channel.send(-1));
    EXPECT_TRUE(channel.send(-2));
    started.add(kSenders);
    for (int s = 0; s < kSenders; ++s) {
      post_counted(s % 2, group, [&, s] {
        started.done();
        const std::error_code result = error_of(channel.send_for(int{s}, kLong));
        if (result == kClosed) ++closed;
        if (!result) ++delivered;
      });
    }
    ASSERT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
    channel.close();
    wait_all(group);
    for (;;) {
      tern::Result<int> value = channel.recv_for(kLong);
      if (!value) {
        EXPECT_EQ(value.error(), kClosed);
        break;
      }
      drained.push_back(*value);
    }
  });
  // Nothing was received before close(): every sender fails, whether it was waiting or came
  // later, and only the values buffered before remain.
  EXPECT_EQ(closed.load(), kSenders);
  EXPECT_EQ(delivered.load(), 0);
  EXPECT_EQ(drained, (std::vector<int>{-1, -2}));
}

TEST(Channel, ReceiversDrainBufferedValuesAfterClose) {
  tern::Channel<int> channel(8);
  std::vector<int> received;
  std::error_code last;
  run(1, [&] {
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(channel.send(int{i}));
    channel.close();
    EXPECT_EQ(error_of(channel.send(99)), kClosed);
    EXPECT_EQ(error_of(channel.send_for(99, kShort)), kClosed);
    for (;;) {
      tern::Result<int> value = channel.recv_for(kLong);
      if (!value) {
        last = value.error();
        break;
      }
      received.push_back(*value);
    }
    EXPECT_EQ(error_of(channel.recv_until(tern::Clock::now() - 1s)), kClosed);
  });
  EXPECT_EQ(received, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(last, kClosed);
}

// ---- interruption ----

TEST(Channel, InterruptCancelsAWaitingRecvAndSend) {
  tern::Channel<int> empty(1);
  tern::Channel<int> full(1);
  std::error_code recv_result;
  std::error_code send_result;
  run(1, [&] {
    EXPECT_TRUE(full.send(1));
    tern::Fiber receiver = tern::spawn([&] { recv_result = error_of(empty.recv()); });
    tern::Fiber sender = tern::spawn([&] { send_result = error_of(full.send(2)); });
    tern::this_fiber::yield();  // both park
    receiver.interrupt();
    sender.interrupt();
    receiver.join();
    sender.join();
    // Neither left a waiter behind, and the cancelled value was not delivered.
    EXPECT_TRUE(empty.try_send(3));
    EXPECT_EQ(empty.try_recv(), 3);
    EXPECT_EQ(full.try_recv(), 1);
    EXPECT_EQ(error_of(full.try_recv()), kTryAgain);
  });
  EXPECT_EQ(recv_result, kCancelled);
  EXPECT_EQ(send_result, kCancelled);
}

// ---- ranged receive ----

TEST(Channel, RangedReceiveReadsUntilClosedAndDrained) {
  tern::Channel<int> channel(3);
  std::vector<int> received;
  run(2, [&] {
    ASSERT_TRUE(tern::post(1, [&] {
      for (int i = 0; i < 100; ++i) EXPECT_TRUE(channel.send_for(int{i}, kLong));
      channel.close();
    }));
    for (int& value : channel) received.push_back(value);
  });
  ASSERT_EQ(received.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(received[i], i);
}

TEST(Channel, RangedReceiveOfAClosedEmptyChannelIsEmpty) {
  tern::Channel<int> channel(1);
  int iterations = 0;
  run(1, [&] {
    channel.close();
    for ([[maybe_unused]] int& value : channel) ++iterations;
  });
  EXPECT_EQ(iterations, 0);
}

TEST(Channel, RangedReceiveEndsWhenTheFiberIsInterrupted) {
  tern::Channel<int> channel(4);
  std::vector<int> received;
  run(1, [&] {
    tern::Fiber reader = tern::spawn([&] {
      for (int& value : channel) received.push_back(value);
    });
    EXPECT_TRUE(channel.send(1));
    EXPECT_TRUE(channel.send(2));
    tern::this_fiber::yield();  // the reader takes both and parks
    reader.interrupt();
    reader.join();
    EXPECT_FALSE(channel.closed());
  });
  EXPECT_EQ(received, (std::vector<int>{1, 2}));
}

// ---- threads outside the runtime ----

TEST(Channel, ThreadOutsideTheRuntimeTrySendsAndClosesToAWaitingFiber) {
  constexpr int kCount = 1000;
  tern::Channel<int> channel(4);
  std::vector<int> received;
  std::error_code last;
  std::atomic<int> bad_errors{0};
  run(1, [&] {
    std::thread producer([&] {
      for (int i = 0; i < kCount; ++i) {
        for (;;) {
          tern::Result<void> sent = channel.try_send(int{i});
          if (sent) break;
          if (sent.error() != kTryAgain) ++bad_errors;
          std::this_thread::yield();
        }
      }
      channel.close();
    });
    for (;;) {
      tern::Result<int> value = channel.recv_for(kLong);
      if (!value) {
        last = value.error();
        break;
      }
      received.push_back(*value);
    }
    producer.join();
  });
  EXPECT_EQ(bad_errors.load(), 0);
  EXPECT_EQ(last, kClosed);
  ASSERT_EQ(received.size(), std::size_t{kCount});
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(received[i], i);
}

TEST(Channel, ThreadOutsideTheRuntimeTryRecvsFromAWaitingFiber) {
  constexpr int kCount = 1000;
  tern::Channel<int> channel(1);
  std::vector<int> received;
  std::error_code last;
  run(1, [&] {
    std::thread consumer([&] {
      for (;;) {
        tern::Result<int> value = channel.try_recv();
        if (value) {
          received.push_back(*value);
        } else if (value.error() == kTryAgain) {
          std::this_thread::yield();
        } else {
          last = value.error();
          return;
        }
      }
    });
    // Most of these sends wait for the thread to make room.
    for (int i = 0; i < kCount; ++i) EXPECT_TRUE(channel.send_for(int{i}, kLong));
    channel.close();
    consumer.join();
  });
  EXPECT_EQ(last, kClosed);
  ASSERT_EQ(received.size(), std::size_t{kCount});
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(received[i], i);
}

// ---- many producers and consumers ----

TEST(Channel, ManyProducersAndConsumersAcrossTwoWorkers) {
  constexpr int kProducers = 4;
  constexpr int kConsumers = 4;
  constexpr int kTotal = kProducers * kStressOps;
  tern::Channel<int> channel(16);
  std::vector<std::vector<int>> received(kConsumers);
  std::atomic<int> order_errors{0};
  tern::WaitGroup producers;
  tern::WaitGroup consumers;
  run(2, [&] {
    for (int c = 0; c < kConsumers; ++c) {
      post_counted(c % 2, consumers, [&, c] {
        std::vector<int> last(kProducers, -1);
        for (;;) {
          // Mix waiting receives with non-waiting ones.
          tern::Result<int> value = c % 2 == 0 ? channel.recv_for(kLong) : channel.try_recv();
          if (!value) {
            if (value.error() == kTryAgain) {
              tern::this_fiber::yield();
              continue;
            }
            EXPECT_EQ(value.error(), kClosed);
            break;
          }
          // Values of one producer reach one consumer in the order they were sent.
          const int producer = *value / kStressOps;
          if (*value <= last[producer]) ++order_errors;
          last[producer] = *value;
          received[c].push_back(*value);
        }
      });
    }
    for (int p = 0; p < kProducers; ++p) {
      post_counted(p % 2, producers, [&, p] {
        for (int i = 0; i < kStressOps; ++i) {
          const int value = p * kStressOps + i;
          if (i % 2 == 0) {
            EXPECT_TRUE(channel.send_for(int{value}, kLong));
          } else {
            int copy = value;
            while (!channel.try_send(std::move(copy))) tern::this_fiber::yield();
          }
        }
      });
    }
    wait_all(producers);
    channel.close();
    wait_all(consumers);
  });
  std::vector<int> seen(kTotal, 0);
  long count = 0;
  for (const std::vector<int>& values : received) {
    for (int value : values) {
      ASSERT_GE(value, 0);
      ASSERT_LT(value, kTotal);
      ++seen[value];
      ++count;
    }
  }
  EXPECT_EQ(count, kTotal);
  for (int value = 0; value < kTotal; ++value) ASSERT_EQ(seen[value], 1) << "value " << value;
  EXPECT_EQ(order_errors.load(), 0);
}

TEST(Channel, ShutdownCancelsFibersParkedInSendAndRecv) {
  tern::Channel<int> empty(1);
  tern::Channel<int> full(1);
  tern::WaitGroup started;
  std::atomic<int> cancelled{0};
  run(2, [&] {
    ASSERT_TRUE(full.send(0));
    started.add(8);
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&, i] {
        started.done();
        const std::error_code result =
            i % 4 < 2 ? error_of(empty.recv()) : error_of(full.send(int{i}));
        if (result == kCancelled) ++cancelled;
      }));
    }
    EXPECT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
  });
  EXPECT_EQ(cancelled.load(), 8);
  EXPECT_EQ(full.size(), 1u);
  EXPECT_EQ(empty.size(), 0u);
}

// ---- select ----

using Either = std::variant<int, std::string>;

TEST(Select, TakesAValueFromEitherChannel) {
  tern::Channel<int> numbers(4);
  tern::Channel<std::string> words(4);
  run(1, [&] {
    EXPECT_TRUE(words.send("w"));
    tern::Result<Either> got = tern::select(numbers, words);
    ASSERT_TRUE(got);
    ASSERT_EQ(got->index(), 1u);
    EXPECT_EQ(std::get<1>(*got), "w");

    EXPECT_TRUE(numbers.send(7));
    got = tern::select(numbers, words);
    ASSERT_TRUE(got);
    ASSERT_EQ(got->index(), 0u);
    EXPECT_EQ(std::get<0>(*got), 7);
  });
}

TEST(Select, TheFirstChannelWinsATieAndNothingIsLost) {
  tern::Channel<int> a(4);
  tern::Channel<int> b(4);
  std::vector<std::pair<std::size_t, int>> got;
  run(1, [&] {
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(a.send(int{i}));
      EXPECT_TRUE(b.send(10 + i));
    }
    for (int i = 0; i < 6; ++i) {
      tern::Result<std::variant<int, int>> value =
          tern::select(a, b, tern::Clock::now() - 1s);  // values ready: no wait needed
      ASSERT_TRUE(value);
      got.emplace_back(value->index(),
                       value->index() == 0 ? std::get<0>(*value) : std::get<1>(*value));
    }
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(b.size(), 0u);
  });
  EXPECT_EQ(got, (std::vector<std::pair<std::size_t, int>>{
                     {0, 0}, {0, 1}, {0, 2}, {1, 10}, {1, 11}, {1, 12}}));
}

TEST(Select, WaitsForASendOnEitherChannelFromAnotherWorker) {
  tern::Channel<int> a(1);
  tern::Channel<int> b(1);
  std::vector<std::size_t> indices;
  run(2, [&] {
    for (std::size_t which : {1u, 0u, 1u}) {
      ASSERT_TRUE(
          tern::post(1, [&, which] { EXPECT_TRUE(which == 0 ? a.send(100) : b.send(200)); }));
      tern::Result<std::variant<int, int>> value = tern::select(a, b, tern::deadline_after(kLong));
      ASSERT_TRUE(value);
      indices.push_back(value->index());
      EXPECT_EQ(value->index() == 0 ? std::get<0>(*value) : std::get<1>(*value),
                which == 0 ? 100 : 200);
    }
  });
  EXPECT_EQ(indices, (std::vector<std::size_t>{1, 0, 1}));
}

TEST(Select, BothClosedFailsWithClosedAfterDraining) {
  tern::Channel<int> a(4);
  tern::Channel<int> b(4);
  std::vector<int> got;
  std::error_code last;
  run(1, [&] {
    EXPECT_TRUE(a.send(1));
    EXPECT_TRUE(b.send(2));
    a.close();
    b.close();
    for (;;) {
      tern::Result<std::variant<int, int>> value = tern::select(a, b, tern::deadline_after(kLong));
      if (!value) {
        last = value.error();
        break;
      }
      got.push_back(value->index() == 0 ? std::get<0>(*value) : std::get<1>(*value));
    }
  });
  EXPECT_EQ(got, (std::vector<int>{1, 2}));
  EXPECT_EQ(last, kClosed);
}

TEST(Select, ClosingBothWhileWaitingFailsWithClosed) {
  tern::Channel<int> a(1);
  tern::Channel<int> b(1);
  std::error_code result;
  run(2, [&] {
    ASSERT_TRUE(tern::post(1, [&] {
      a.close();
      b.close();
    }));
    result = error_of(tern::select(a, b, tern::deadline_after(kLong)));
  });
  EXPECT_EQ(result, kClosed);
}

TEST(Select, OneClosedKeepsWaitingOnTheOther) {
  tern::Channel<int> a(1);
  tern::Channel<int> b(1);
  tern::Result<std::variant<int, int>> got = tern::fail(std::errc::io_error);
  run(1, [&] {
    tern::Fiber selector =
        tern::spawn([&] { got = tern::select(a, b, tern::deadline_after(kLong)); });
    tern::this_fiber::yield();  // the selector parks on both
    a.close();                  // wakes it; it must go back to waiting on b alone
    tern::this_fiber::yield();
    tern::this_fiber::yield();
    EXPECT_EQ(error_of(got), std::make_error_code(std::errc::io_error)) << "select returned early";
    EXPECT_TRUE(b.send(5));
    selector.join();
  });
  ASSERT_TRUE(got);
  ASSERT_EQ(got->index(), 1u);
  EXPECT_EQ(std::get<1>(*got), 5);
}

TEST(Select, AClosedFirstChannelDoesNotHideTheSecond) {
  tern::Channel<int> a(1);
  tern::Channel<int> b(1);
  run(1, [&] {
    a.close();
    EXPECT_TRUE(b.send(9));
    tern::Result<std::variant<int, int>> got = tern::select(a, b);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->index(), 1u);
    // Closed first channel, empty open second: times out rather than reporting closed.
    EXPECT_EQ(error_of(tern::select(a, b, tern::deadline_after(kShort))), kTimedOut);
    b.close();
    EXPECT_EQ(error_of(tern::select(a, b)), kClosed);
  });
}

TEST(Select, TimesOutAfterTheDeadlineAndLeavesNoWaiters) {
  tern::Channel<int> a(1);
  tern::Channel<int> b(1);
  run(1, [&] {
    const auto start = tern::Clock::now();
    const std::error_code result = error_of(tern::select(a, b, tern::deadline_after(kShort)));
    const auto elapsed = since(start);
    EXPECT_EQ(result, kTimedOut);
    EXPECT_GE(elapsed, kShort);
    EXPECT_TRUE(is_deadline(error_of(tern::select(a, b, tern::Clock::now() - 1s))));
    // Sends after the timeout are buffered, not handed to the departed select.
    EXPECT_TRUE(a.try_send(1));
    EXPECT_TRUE(b.try_send(2));
    EXPECT_EQ(a.size(), 1u);
    EXPECT_EQ(b.size(), 1u);
    EXPECT_EQ(a.recv(), 1);
    EXPECT_EQ(b.recv(), 2);
  });
}

TEST(Select, InterruptCancelsAWaitingSelect) {
  tern::Channel<int> a(1);
  tern::Channel<int> b(1);
  std::error_code result;
  run(1, [&] {
    tern::Fiber selector = tern::spawn([&] { result = error_of(tern::select(a, b)); });
    tern::this_fiber::yield();
    selector.interrupt();
    selector.join();
    EXPECT_TRUE(a.try_send(1));
    EXPECT_TRUE(b.try_send(2));
    EXPECT_EQ(a.size(), 1u);
    EXPECT_EQ(b.size(), 1u);
    EXPECT_EQ(a.try_recv(), 1);
    EXPECT_EQ(b.try_recv(), 2);
  });
  EXPECT_EQ(result, kCancelled);
}

TEST(Select, TakingAValueWakesASenderWaitingOnAFullChannel) {
  tern::Channel<int> a(1);
  tern::Channel<int> b(1);
  std::error_code sent{std::make_error_code(std::errc::io_error)};
  run(1, [&] {
    EXPECT_TRUE(b.send(1));
    tern::Fiber sender = tern::spawn([&] { sent = error_of(b.send_for(2, kLong)); });
    tern::this_fiber::yield();  // the sender parks on the full channel
    tern::Result<std::variant<int, int>> first = tern::select(a, b);
    ASSERT_TRUE(first);
    EXPECT_EQ(std::get<1>(*first), 1);
    sender.join();
    EXPECT_EQ(sent, std::error_code{});
    tern::Result<std::variant<int, int>> second = tern::select(a, b);
    ASSERT_TRUE(second);
    EXPECT_EQ(std::get<1>(*second), 2);
  });
}

// Two producers per channel on both workers and selecting consumers on both workers, with
// small capacities so that senders wait and both channels have values at once: every value
// is received exactly once.
TEST(Select, RacingSendersAndSelectorsNeverLoseOrDuplicateAValue) {
  constexpr int kPerProducer = kStressOps;
  constexpr int kProducersPerChannel = 2;
  constexpr int kTotalPerChannel = kPerProducer * kProducersPerChannel;
  constexpr int kSelectors = 4;
  tern::Channel<int> a(2);
  tern::Channel<int> b(1);
  std::vector<std::vector<int>> from_a(kSelectors);
  std::vector<std::vector<int>> from_b(kSelectors);
  std::atomic<int> failures{0};
  tern::WaitGroup producers;
  tern::WaitGroup selectors;
  run(2, [&] {
    for (int s = 0; s < kSelectors; ++s) {
      post_counted(s % 2, selectors, [&, s] {
        for (;;) {
          tern::Result<std::variant<int, int>> value =
              tern::select(a, b, tern::deadline_after(kLong));
          if (!value) {
            if (value.error() != kClosed) ++failures;
            return;
          }
          if (value->index() == 0) {
            from_a[s].push_back(std::get<0>(*value));
          } else {
            from_b[s].push_back(std::get<1>(*value));
          }
        }
      });
    }
    for (int p = 0; p < 2 * kProducersPerChannel; ++p) {
      post_counted(p % 2, producers, [&, p] {
        tern::Channel<int>& channel = p < kProducersPerChannel ? a : b;
        const int base = (p % kProducersPerChannel) * kPerProducer;
        for (int i = 0; i < kPerProducer; ++i) {
          if (!channel.send_for(base + i, kLong)) ++failures;
        }
      });
    }
    wait_all(producers);
    a.close();
    b.close();
    wait_all(selectors);
  });
  EXPECT_EQ(failures.load(), 0);
  for (auto* received : {&from_a, &from_b}) {
    std::vector<int> seen(kTotalPerChannel, 0);
    for (const std::vector<int>& values : *received) {
      for (int value : values) {
        ASSERT_GE(value, 0);
        ASSERT_LT(value, kTotalPerChannel);
        ++seen[value];
      }
    }
    for (int value = 0; value < kTotalPerChannel; ++value)
      ASSERT_EQ(seen[value], 1) << (received == &from_a ? "a" : "b") << " value " << value;
  }
}

// The second channel always has a value while a sender on the other worker keeps sending to
// the first: a send that lands while select is taking from the second channel must not go to
// the departing select (it stays in the first channel for the next round).
TEST(Select, ASendToTheFirstWhileTakingFromTheSecondIsNotLost) {
  constexpr int kCount = kStressOps;
  tern::Channel<int> a(1);
  tern::Channel<int> b(tern::Channel<int>::kUnbounded);
  std::vector<int> seen_a(kCount, 0);
  std::vector<int> seen_b(kCount, 0);
  std::error_code last;
  run(2, [&] {
    for (int i = 0; i < kCount; ++i) ASSERT_TRUE(b.try_send(int{i}));
    b.close();  // keeps its values for select to drain
    ASSERT_TRUE(tern::post(1, [&] {
      for (int i = 0; i < kCount; ++i) {
        if (!a.send_for(int{i}, kLong)) {
          ADD_FAILURE() << "send " << i << " failed";
          break;
        }
      }
      a.close();
    }));
    for (;;) {
      tern::Result<std::variant<int, int>> got = tern::select(a, b, tern::deadline_after(kLong));
      if (!got) {
        last = got.error();
        break;
      }
      const int value = got->index() == 0 ? std::get<0>(*got) : std::get<1>(*got);
      ASSERT_GE(value, 0);
      ASSERT_LT(value, kCount);
      ++(got->index() == 0 ? seen_a : seen_b)[value];
    }
  });
  EXPECT_EQ(last, kClosed);
  for (int value = 0; value < kCount; ++value) {
    ASSERT_EQ(seen_a[value], 1) << "a value " << value;
    ASSERT_EQ(seen_b[value], 1) << "b value " << value;
  }
}

// Sends from worker 1 race with interrupts and very short deadlines of receivers and
// selectors on worker 0: every value sent is received exactly once, and a value whose send
// failed (its deadline passed) is never received.
TEST(Channel, InterruptsAndDeadlinesRacingWithSendsNeverLoseAValue) {
  constexpr int kCount = kStressOps;
  tern::Channel<int> a(2);
  tern::Channel<int> b(2);
  std::vector<int> sent(2 * kCount, 0);
  std::vector<int> seen(2 * kCount, 0);
  std::atomic<int> bad_errors{0};
  std::atomic<long> cancelled{0};
  tern::WaitGroup senders;
  run(2, [&] {
    std::vector<tern::Fiber> receivers;
    for (int r = 0; r < 4; ++r) {
      receivers.push_back(tern::spawn([&, r] {
        for (;;) {
          int value = -1;
          std::error_code error;
          if (r < 2) {
            tern::Result<int> got = (r == 0 ? a : b).recv_for(std::chrono::microseconds(20 + r));
            if (got) value = *got;
            error = error_of(got);
          } else {
            tern::Result<std::variant<int, int>> got =
                tern::select(a, b, tern::deadline_after(std::chrono::microseconds(30)));
            if (got) value = got->index() == 0 ? std::get<0>(*got) : std::get<1>(*got);
            error = error_of(got);
          }
          if (!error) {
            ++seen[value];
          } else if (error == kCancelled) {
            ++cancelled;
          } else if (error == kClosed) {
            return;  // drained: a plain receiver's channel, or both for a selector
          } else if (error != kTimedOut) {
            ++bad_errors;
          }
        }
      }));
    }
    tern::this_fiber::yield();  // every receiver parks: nothing sent yet
    receivers[0].interrupt();
    tern::this_fiber::yield();
    EXPECT_EQ(cancelled.load(), 1);
    for (int s = 0; s < 2; ++s) {
      post_counted(1, senders, [&, s] {
        tern::Channel<int>& channel = s == 0 ? a : b;
        for (int i = 0; i < kCount; ++i) {
          const int value = s * kCount + i;
          tern::Result<void> result = channel.send_for(int{value}, std::chrono::microseconds(50));
          if (result) {
            sent[value] = 1;
          } else if (result.error() != kTimedOut) {
            ++bad_errors;
          }
        }
      });
    }
    for (int i = 0; senders.pending() > 0; ++i) {
      receivers[i % receivers.size()].interrupt();
      tern::this_fiber::yield();
    }
    EXPECT_TRUE(senders.wait_for(kLong));
    a.close();
    b.close();
    for (tern::Fiber& receiver : receivers) receiver.join();
  });
  EXPECT_EQ(bad_errors.load(), 0);
  long sent_count = 0;
  for (int value = 0; value < 2 * kCount; ++value) {
    sent_count += sent[value];
    ASSERT_EQ(seen[value], sent[value]) << "value " << value;
  }
  EXPECT_GT(sent_count, 0);
}

// Selectors and plain receivers compete for the same channels.
TEST(Select, SelectorsAndPlainReceiversShareChannels) {
  constexpr int kTotal = 2 * kStressOps;
  tern::Channel<int> a(4);
  tern::Channel<int> b(4);
  std::vector<int> seen_a(kTotal, 0);
  std::vector<int> seen_b(kTotal, 0);
  tern::Mutex seen_mutex;
  std::atomic<int> failures{0};
  tern::WaitGroup producers;
  tern::WaitGroup consumers;
  run(2, [&] {
    for (int c = 0; c < 4; ++c) {
      post_counted(c % 2, consumers, [&, c] {
        for (;;) {
          int value = -1;
          bool is_a = false;
          if (c < 2) {
            tern::Result<std::variant<int, int>> got =
                tern::select(a, b, tern::deadline_after(kLong));
            if (!got) {
              if (got.error() != kClosed) ++failures;
              return;
            }
            is_a = got->index() == 0;
            value = is_a ? std::get<0>(*got) : std::get<1>(*got);
          } else {
            tern::Channel<int>& channel = c == 2 ? a : b;
            tern::Result<int> got = channel.recv_for(kLong);
            if (!got) {
              if (got.error() != kClosed) ++failures;
              return;
            }
            is_a = c == 2;
            value = *got;
          }
          std::lock_guard hold(seen_mutex);
          ++(is_a ? seen_a : seen_b)[value];
        }
      });
    }
    for (int p = 0; p < 2; ++p) {
      post_counted(p, producers, [&, p] {
        tern::Channel<int>& channel = p == 0 ? a : b;
        for (int i = 0; i < kTotal; ++i) {
          if (!channel.send_for(int{i}, kLong)) ++failures;
        }
      });
    }
    wait_all(producers);
    a.close();
    b.close();
    wait_all(consumers);
  });
  EXPECT_EQ(failures.load(), 0);
  for (int value = 0; value < kTotal; ++value) {
    ASSERT_EQ(seen_a[value], 1) << "a value " << value;
    ASSERT_EQ(seen_b[value], 1) << "b value " << value;
  }
}

TEST(Select, ShutdownCancelsParkedSelectors) {
  tern::Channel<int> a(1);
  tern::Channel<std::string> b(1);
  tern::WaitGroup started;
  std::atomic<int> cancelled{0};
  run(2, [&] {
    started.add(4);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&] {
        started.done();
        if (error_of(tern::select(a, b)) == kCancelled) ++cancelled;
      }));
    }
    EXPECT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
  });
  EXPECT_EQ(cancelled.load(), 4);
}

}  // namespace
