#pragma once

#include <cstddef>
#include <functional>
#include <type_traits>
#include <utility>

#include "tern/base/outcome.h"
#include "tern/fiber/detail/parked_node.h"

namespace tern::io {

namespace detail {
// Runs job on the offload pool and parks the calling fiber until it has run. Worker fibers only.
void offload_erased(std::move_only_function<void()> job);
}  // namespace detail

// Runs fn() on tern's pool of threads for blocking or CPU-heavy work (getaddrinfo, file I/O,
// compression) and parks the calling fiber, not its worker, until fn returns; returns fn's
// result or rethrows its exception. Not interruptible: fn cannot be abandoned half-way.
// From a shared-stack fiber (StackMode::shared) fn runs on the calling worker itself, blocking
// it: fn and its result live on the caller's stack, which moves while a fiber is parked.
// Worker fibers only.
template <typename Fn>
std::invoke_result_t<Fn&> offload(Fn&& fn) {
  tern::detail::Outcome<std::invoke_result_t<Fn&>> outcome;
  if (tern::detail::parks_off_stack()) [[unlikely]] {
    tern::detail::capture(outcome, fn);
    return outcome.get();
  }
  detail::offload_erased([&] { tern::detail::capture(outcome, fn); });
  return outcome.get();
}

// Sets how many threads the offload pool may start (default: 4, or the CPU count if larger).
// Takes effect for threads not yet started. Any thread.
void set_offload_threads(std::size_t count) noexcept;

}  // namespace tern::io
