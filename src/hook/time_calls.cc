// The hooked sleeps: in a fiber they sleep the fiber (tern::this_fiber::sleep_until) and end
// early with EINTR when it is interrupted, as a signal would end libc's; elsewhere libc's.
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "originals.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

using namespace tern::hook::detail;

namespace {

bool in_fiber() noexcept { return tern::Runtime::current() != nullptr; }

// Sleeps the fiber until the deadline; the time left if it was interrupted first, else zero.
tern::Clock::duration fiber_sleep(tern::Deadline deadline) noexcept {
  if (tern::this_fiber::sleep_until(deadline)) return tern::Clock::duration::zero();
  const auto left = deadline - tern::Clock::now();
  return left > tern::Clock::duration::zero() ? left : tern::Clock::duration(1);
}

}  // namespace

extern "C" {

// Named by tern::hook's link options (-u) so that the linker takes this object whole, even when
// another library (a sanitizer's runtime) already defines the names it replaces.
extern const char tern_hook_time_calls;
const char tern_hook_time_calls = 0;

int nanosleep(const timespec* request, timespec* remaining) {
  if (!in_fiber() || request == nullptr || request->tv_sec < 0 || request->tv_nsec < 0 ||
      request->tv_nsec >= 1'000'000'000)
    return originals().nanosleep(request, remaining);  // its EFAULT and EINVAL too
  const auto left = fiber_sleep(tern::deadline_after(std::chrono::seconds(request->tv_sec) +
                                                     std::chrono::nanoseconds(request->tv_nsec)));
  if (left == tern::Clock::duration::zero()) return 0;
  if (remaining != nullptr) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    remaining->tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    remaining->tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  errno = EINTR;
  return -1;
}

int usleep(useconds_t microseconds) {
  if (!in_fiber()) return originals().usleep(microseconds);
  if (fiber_sleep(tern::deadline_after(std::chrono::microseconds(microseconds))) ==
      tern::Clock::duration::zero())
    return 0;
  errno = EINTR;
  return -1;
}

unsigned sleep(unsigned seconds) {
  if (!in_fiber()) return originals().sleep(seconds);
  const auto left = fiber_sleep(tern::deadline_after(std::chrono::seconds(seconds)));
  return static_cast<unsigned>(std::chrono::ceil<std::chrono::seconds>(left).count());
}

}  // extern "C"
