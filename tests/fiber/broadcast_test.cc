// tern::Broadcast: every subscriber gets every value, late subscribers, lagging (Errc::lagged
// once, missed() exact), deadlines, interruption, close, subscribers on both workers, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <tern/fiber/broadcast.h>
#include <tern/fiber/fiber.h>
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
const std::error_code kLagged = tern::Errc::lagged;
const std::error_code kTryAgain = std::make_error_code(std::errc::resource_unavailable_try_again);
const std::error_code kTimedOut = tern::deadline_exceeded();
const std::error_code kCancelled = std::make_error_code(std::errc::operation_canceled);

TEST(Broadcast, EverySubscriberGetsEveryValueInOrder) {
  tern::Broadcast<std::string> broadcast(8);
  auto first = broadcast.subscribe();
  auto second = broadcast.subscribe();
  EXPECT_EQ(error_of(first.try_recv()), kTryAgain);
  for (const char* word : {"a", "b", "c"}) EXPECT_TRUE(broadcast.publish(word));
  for (auto* subscriber : {&first, &second}) {
    EXPECT_EQ(subscriber->try_recv(), "a");
    EXPECT_EQ(subscriber->try_recv(), "b");
    EXPECT_EQ(subscriber->try_recv(), "c");
    EXPECT_EQ(error_of(subscriber->try_recv()), kTryAgain);
    EXPECT_EQ(subscriber->missed(), 0u);
  }
}

TEST(Broadcast, ASubscriberOnlySeesValuesPublishedAfterItSubscribed) {
  tern::Broadcast<int> broadcast(8);
  EXPECT_TRUE(broadcast.publish(1));
  EXPECT_TRUE(broadcast.publish(2));
  auto late = broadcast.subscribe();
  EXPECT_EQ(error_of(late.try_recv()), kTryAgain);
  EXPECT_TRUE(broadcast.publish(3));
  EXPECT_EQ(late.try_recv(), 3);
  EXPECT_EQ(error_of(late.try_recv()), kTryAgain);
}

TEST(Broadcast, ALaggingSubscriberGetsLaggedOnceAndAnExactMissedCount) {
  tern::Broadcast<int> broadcast(4);
  auto slow = broadcast.subscribe();
  auto fast = broadcast.subscribe();
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(broadcast.publish(int{i}));
    EXPECT_EQ(fast.try_recv(), i);
  }
  // Only the last four were kept: six were lost.
  EXPECT_EQ(error_of(slow.try_recv()), kLagged);
  EXPECT_EQ(slow.missed(), 6u);
  for (int i = 6; i < 10; ++i) EXPECT_EQ(slow.try_recv(), i);  // no second lagged
  EXPECT_EQ(error_of(slow.try_recv()), kTryAgain);
  EXPECT_EQ(fast.missed(), 0u);

  // Falling behind again adds to the count.
  for (int i = 10; i < 17; ++i) EXPECT_TRUE(broadcast.publish(int{i}));
  EXPECT_EQ(error_of(slow.try_recv()), kLagged);
  EXPECT_EQ(slow.missed(), 9u);
  for (int i = 13; i < 17; ++i) EXPECT_EQ(slow.try_recv(), i);
  EXPECT_EQ(error_of(slow.try_recv()), kTryAgain);
}

TEST(Broadcast, AWaitingRecvReportsLaggedToo) {
  tern::Broadcast<int> broadcast(2);
  auto subscriber = broadcast.subscribe();
  run(1, [&] {
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(broadcast.publish(int{i}));
    EXPECT_EQ(error_of(subscriber.recv()), kLagged);
    EXPECT_EQ(subscriber.missed(), 3u);
    EXPECT_EQ(subscriber.recv(), 3);
    EXPECT_EQ(subscriber.recv_for(kShort), 4);
  });
}

TEST(Broadcast, CapacityOneKeepsOnlyTheLatest) {
  tern::Broadcast<int> broadcast(1);
  auto subscriber = broadcast.subscribe();
  EXPECT_TRUE(broadcast.publish(1));
  EXPECT_TRUE(broadcast.publish(2));
  EXPECT_EQ(error_of(subscriber.try_recv()), kLagged);
  EXPECT_EQ(subscriber.missed(), 1u);
  EXPECT_EQ(subscriber.try_recv(), 2);
}

TEST(Broadcast, RecvWaitsForAPublishFromAnotherWorker) {
  tern::Broadcast<int> broadcast(4);
  auto subscriber = broadcast.subscribe();
  tern::Result<int> got = tern::fail(std::errc::io_error);
  run(2, [&] {
    ASSERT_TRUE(tern::post(1, [&] { EXPECT_TRUE(broadcast.publish(77)); }));
    got = subscriber.recv_for(kLong);
  });
  EXPECT_EQ(got, 77);
}

TEST(Broadcast, PublishWakesEveryWaitingSubscriberOnBothWorkers) {
  constexpr int kSubscribers = 6;
  tern::Broadcast<int> broadcast(4);
  std::vector<tern::Broadcast<int>::Subscriber> subscribers;
  for (int i = 0; i < kSubscribers; ++i) subscribers.push_back(broadcast.subscribe());
  tern::WaitGroup started;
  tern::WaitGroup group;
  std::atomic<int> got{0};
  run(2, [&] {
    started.add(kSubscribers);
    for (int i = 0; i < kSubscribers; ++i) {
      post_counted(i % 2, group, [&, i] {
        started.done();
        if (subscribers[i].recv_for(kLong) == 5) ++got;
      });
    }
    ASSERT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
    EXPECT_TRUE(broadcast.publish(5));
    wait_all(group);
  });
  EXPECT_EQ(got.load(), kSubscribers);
}

TEST(Broadcast, PublishFromAThreadOutsideTheRuntime) {
  tern::Broadcast<int> broadcast(4);
  auto subscriber = broadcast.subscribe();
  tern::Result<int> got = tern::fail(std::errc::io_error);
  run(1, [&] {
    std::thread publisher([&] { EXPECT_TRUE(broadcast.publish(3)); });
    got = subscriber.recv_for(kLong);
    publisher.join();
  });
  EXPECT_EQ(got, 3);
}

TEST(Broadcast, RecvForTimesOutAfterTheTimeout) {
  tern::Broadcast<int> broadcast(4);
  auto subscriber = broadcast.subscribe();
  run(1, [&] {
    const auto start = tern::Clock::now();
    const std::error_code result = error_of(subscriber.recv_for(kShort));
    const auto elapsed = since(start);
    EXPECT_EQ(result, kTimedOut);
    EXPECT_TRUE(is_deadline(result));
    EXPECT_GE(elapsed, kShort);
    EXPECT_TRUE(is_deadline(error_of(subscriber.recv_until(tern::Clock::now() - 1s))));
    // A kept value is returned even when the deadline has passed; the timed-out waits left
    // nothing behind.
    EXPECT_TRUE(broadcast.publish(1));
    EXPECT_EQ(subscriber.recv_until(tern::Clock::now() - 1s), 1);
  });
}

TEST(Broadcast, InterruptCancelsAWaitingRecv) {
  tern::Broadcast<int> broadcast(4);
  auto subscriber = broadcast.subscribe();
  std::error_code result;
  run(1, [&] {
    tern::Fiber receiver = tern::spawn([&] { result = error_of(subscriber.recv()); });
    tern::this_fiber::yield();
    receiver.interrupt();
    receiver.join();
    // The subscriber is intact: it still gets what is published next.
    EXPECT_TRUE(broadcast.publish(8));
    EXPECT_EQ(subscriber.try_recv(), 8);
  });
  EXPECT_EQ(result, kCancelled);
}

TEST(Broadcast, CloseFailsPublishAndSubscribersDrainFirst) {
  tern::Broadcast<int> broadcast(4);
  auto subscriber = broadcast.subscribe();
  EXPECT_TRUE(broadcast.publish(1));
  EXPECT_TRUE(broadcast.publish(2));
  broadcast.close();
  broadcast.close();  // idempotent
  EXPECT_EQ(error_of(broadcast.publish(3)), kClosed);
  EXPECT_EQ(subscriber.try_recv(), 1);
  EXPECT_EQ(subscriber.try_recv(), 2);
  EXPECT_EQ(error_of(subscriber.try_recv()), kClosed);
  auto after_close = broadcast.subscribe();
  EXPECT_EQ(error_of(after_close.try_recv()), kClosed);
  run(1, [&] {
    EXPECT_EQ(error_of(subscriber.recv()), kClosed);
    EXPECT_EQ(error_of(subscriber.recv_for(kLong)), kClosed);
  });
}

TEST(Broadcast, CloseWakesWaitingSubscribersOnBothWorkers) {
  constexpr int kSubscribers = 6;
  tern::Broadcast<int> broadcast(4);
  std::vector<tern::Broadcast<int>::Subscriber> subscribers;
  for (int i = 0; i < kSubscribers; ++i) subscribers.push_back(broadcast.subscribe());
  tern::WaitGroup started;
  tern::WaitGroup group;
  std::atomic<int> closed{0};
  run(2, [&] {
    started.add(kSubscribers);
    for (int i = 0; i < kSubscribers; ++i) {
      post_counted(i % 2, group, [&, i] {
        started.done();
        if (error_of(subscribers[i].recv_for(kLong)) == kClosed) ++closed;
      });
    }
    ASSERT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
    broadcast.close();
    wait_all(group);
  });
  EXPECT_EQ(closed.load(), kSubscribers);
}

// With room for every value, each subscriber on either worker sees the whole stream in order.
TEST(Broadcast, EverySubscriberOnBothWorkersGetsTheWholeStream) {
  constexpr int kSubscribers = 4;
  tern::Broadcast<int> broadcast(kStressOps);
  std::vector<tern::Broadcast<int>::Subscriber> subscribers;
  for (int i = 0; i < kSubscribers; ++i) subscribers.push_back(broadcast.subscribe());
  std::vector<std::vector<int>> received(kSubscribers);
  tern::WaitGroup group;
  run(2, [&] {
    for (int s = 0; s < kSubscribers; ++s) {
      post_counted(s % 2, group, [&, s] {
        for (;;) {
          tern::Result<int> value = subscribers[s].recv_for(kLong);
          if (!value) {
            EXPECT_EQ(value.error(), kClosed);
            return;
          }
          received[s].push_back(*value);
        }
      });
    }
    post_counted(1, group, [&] {
      for (int i = 0; i < kStressOps; ++i) {
        EXPECT_TRUE(broadcast.publish(int{i}));
        if (i % 64 == 0) tern::this_fiber::yield();
      }
      broadcast.close();
    });
    wait_all(group);
  });
  for (int s = 0; s < kSubscribers; ++s) {
    EXPECT_EQ(subscribers[s].missed(), 0u);
    ASSERT_EQ(received[s].size(), std::size_t{kStressOps}) << "subscriber " << s;
    for (int i = 0; i < kStressOps; ++i) ASSERT_EQ(received[s][i], i) << "subscriber " << s;
  }
}

// With a small capacity subscribers fall behind; each value is then either received (in
// order, once) or counted in missed(), never both and never neither.
TEST(Broadcast, LaggingSubscribersAccountForEveryValue) {
  constexpr int kSubscribers = 4;
  tern::Broadcast<int> broadcast(8);
  std::vector<tern::Broadcast<int>::Subscriber> subscribers;
  for (int i = 0; i < kSubscribers; ++i) subscribers.push_back(broadcast.subscribe());
  std::vector<long> received(kSubscribers, 0);
  std::vector<int> lags(kSubscribers, 0);
  std::atomic<int> failures{0};
  tern::WaitGroup group;
  run(2, [&] {
    for (int s = 0; s < kSubscribers; ++s) {
      post_counted(s % 2, group, [&, s] {
        int last = -1;
        std::uint64_t missed_before = 0;
        for (;;) {
          tern::Result<int> value = subscribers[s].recv_for(kLong);
          if (!value) {
            if (value.error() == kLagged) {
              ++lags[s];
              // The next value skips exactly what missed() grew by.
              const std::uint64_t skipped = subscribers[s].missed() - missed_before;
              missed_before = subscribers[s].missed();
              if (skipped == 0) ++failures;
              last += static_cast<int>(skipped);
              continue;
            }
            if (value.error() != kClosed) ++failures;
            return;
          }
          if (*value != last + 1) ++failures;
          last = *value;
          ++received[s];
          if (*value % (s + 2) == 0) tern::this_fiber::yield();  // fall behind now and then
        }
      });
    }
    post_counted(0, group, [&] {
      for (int i = 0; i < kStressOps; ++i) {
        EXPECT_TRUE(broadcast.publish(int{i}));
        if (i % 16 == 0) tern::this_fiber::yield();
      }
      broadcast.close();
    });
    wait_all(group);
  });
  EXPECT_EQ(failures.load(), 0);
  for (int s = 0; s < kSubscribers; ++s) {
    EXPECT_EQ(received[s] + static_cast<long>(subscribers[s].missed()), long{kStressOps})
        << "subscriber " << s << " lagged " << lags[s] << " times";
  }
}

TEST(Broadcast, ShutdownCancelsParkedSubscribersOnBothWorkers) {
  constexpr int kSubscribers = 6;
  tern::Broadcast<int> broadcast(4);
  std::vector<tern::Broadcast<int>::Subscriber> subscribers;
  for (int i = 0; i < kSubscribers; ++i) subscribers.push_back(broadcast.subscribe());
  tern::WaitGroup started;
  std::atomic<int> cancelled{0};
  run(2, [&] {
    started.add(kSubscribers);
    for (int i = 0; i < kSubscribers; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&, i] {
        started.done();
        if (error_of(subscribers[i].recv()) == kCancelled) ++cancelled;
      }));
    }
    EXPECT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
  });
  EXPECT_EQ(cancelled.load(), kSubscribers);
}

}  // namespace
