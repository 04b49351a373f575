// Helpers shared by the sync primitive tests (tests/fiber/*_test.cc): runtimes, timing, and
// fibers posted to a given worker and counted in a WaitGroup.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <system_error>
#include <utility>

#include <tern/base/clock.h>
#include <tern/base/result.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/wait_group.h>

namespace tern_test {

using namespace std::chrono_literals;

// Operations per fiber in the stress tests (a few seconds at most even under TSan).
inline constexpr int kStressOps = 10000;

// The timeout of the deadline tests: long enough to notice a wait that ends early.
inline constexpr auto kShort = 30ms;
// A deadline for waits that something else must end: a bug fails the test instead of hanging.
inline constexpr auto kLong = 20s;

// Runs fn as the first fiber of a fresh runtime with `workers` workers; returns once the
// runtime has shut down.
inline void run(std::size_t workers, std::move_only_function<void()> fn) {
  tern::Runtime runtime(tern::RuntimeOptions{.workers = workers});
  runtime.run(std::move(fn));
}

// Runs fn in a new fiber on `worker`, counted in `group` (done() when fn returns). Worker
// fibers only.
inline void post_counted(std::size_t worker, tern::WaitGroup& group,
                         std::move_only_function<void()> fn) {
  group.add();
  tern::Result<void> posted = tern::post(worker, [&group, fn = std::move(fn)]() mutable {
    fn();
    group.done();
  });
  EXPECT_TRUE(posted) << posted.error().message();
  if (!posted) group.done();
}

// Waits (with kLong as a safety net) until every fiber counted in `group` is done.
inline void wait_all(tern::WaitGroup& group) {
  tern::Result<void> waited = group.wait_for(kLong);
  ASSERT_TRUE(waited) << "fibers did not finish: " << waited.error().message();
}

// Whether `error` is the error of a wait whose deadline passed: it compares equal to
// std::errc::timed_out and its message says "deadline exceeded". Any thread.
inline ::testing::AssertionResult is_deadline(std::error_code error) {
  if (error != std::errc::timed_out)
    return ::testing::AssertionFailure() << "not timed_out: " << error.message();
  if (error.message() != "deadline exceeded")
    return ::testing::AssertionFailure() << "message is '" << error.message() << "'";
  return ::testing::AssertionSuccess();
}

// Time since `start`.
inline tern::Clock::duration since(tern::Clock::time_point start) {
  return tern::Clock::now() - start;
}

}  // namespace tern_test
