// Debug builds catch an rpc::Channel used from a worker other than the one that opened it: the
// program aborts with a message naming the call and what to do (under both I/O backends).

#include <gtest/gtest.h>

#include <string>

#include "tern/base/clock.h"
#include "tern/fiber/event.h"
#include "tern/fiber/runtime.h"
#include "tern/net/address.h"
#include "tern/net/tcp_listener.h"
#include "tern/rpc/channel.h"

namespace {

using namespace std::chrono_literals;

// Opens a channel on worker 0 to a loopback listener (connections are accepted by the kernel's
// queue; nothing needs to answer) and runs `use` with it on worker `worker`.
template <typename Use>
void use_from(std::size_t worker, Use use) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(tern::net::Address::loopback(0));
    ASSERT_TRUE(listener) << listener.error().message();
    tern::Result<tern::net::Address> address = listener->local_address();
    ASSERT_TRUE(address) << address.error().message();
    auto channel = tern::rpc::Channel::open(address->to_string());
    ASSERT_TRUE(channel) << channel.error().to_string();
    tern::Event done;
    ASSERT_TRUE(tern::post(worker, [&] {
      use(*channel);
      done.set();
    }));
    ASSERT_TRUE(done.wait_for(20s));
  });
}

TEST(ChannelWorkerCheck, TheOwningWorkerUsesItsChannel) {
  std::size_t endpoints = 0;
  use_from(0, [&](tern::rpc::Channel& channel) {
    endpoints = channel.stats().endpoints;
    EXPECT_TRUE(channel.wait_connected(tern::deadline_after(20s)).ok());
  });
  EXPECT_EQ(endpoints, 1u);
}

TEST(ChannelWorkerCheckDeathTest, AChannelUsedFromAnotherWorkerAborts) {
  if (!TERN_DEBUG_CHECKS) GTEST_SKIP() << "the check is compiled into debug builds only";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(use_from(1,
                        [](tern::rpc::Channel& channel) {
                          (void)channel.wait_connected(tern::deadline_after(20s));
                        }),
               "tern::rpc::Channel::wait_connected called on worker 1, but the channel was "
               "opened on worker 0: a Channel is used only from fibers of the worker that opened "
               "it \\(open one channel per worker, or post the call to worker 0\\)");
  EXPECT_DEATH(use_from(1, [](tern::rpc::Channel& channel) { (void)channel.stats(); }),
               "tern::rpc::Channel::stats called on worker 1");
}

}  // namespace
