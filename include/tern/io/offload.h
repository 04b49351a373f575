#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace tern::io {

namespace detail {
// Runs job on the offload pool and parks the calling fiber until it has run. Worker fibers only.
void offload_erased(std::move_only_function<void()> job);
}  // namespace detail

// Runs fn() on tern's pool of threads for blocking or CPU-heavy work (getaddrinfo, file I/O,
// compression) and parks the calling fiber, not its worker, until fn returns; returns fn's
// result or rethrows its exception. Not interruptible: fn cannot be abandoned half-way.
// Worker fibers only.
template <typename Fn>
std::invoke_result_t<Fn&> offload(Fn&& fn) {
  using R = std::invoke_result_t<Fn&>;
  std::exception_ptr error;
  if constexpr (std::is_void_v<R>) {
    detail::offload_erased([&] {
      try {
        fn();
      } catch (...) {
        error = std::current_exception();
      }
    });
    if (error) std::rethrow_exception(error);
  } else {
    std::optional<R> result;
    detail::offload_erased([&] {
      try {
        result.emplace(fn());
      } catch (...) {
        error = std::current_exception();
      }
    });
    if (error) std::rethrow_exception(error);
    return std::move(*result);
  }
}

// Sets how many threads the offload pool may start (default: 4, or the CPU count if larger).
// Takes effect for threads not yet started. Any thread.
void set_offload_threads(std::size_t count) noexcept;

}  // namespace tern::io
