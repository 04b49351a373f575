#pragma once

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace tern::detail {

// What calling a function produced: its value (or nothing, for void) or the exception it threw.
// Carries a result from the thread or fiber that ran the function to the one that waits for it.
template <typename R>
struct Outcome {
  std::optional<R> value;
  std::exception_ptr error;
  // The value, or rethrows the exception.
  R get() {
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }
};

template <>
struct Outcome<void> {
  std::exception_ptr error;
  void get() {
    if (error) std::rethrow_exception(error);
  }
};

// Calls fn() and stores what it returned or threw into out. Never throws.
template <typename Fn>
void capture(Outcome<std::invoke_result_t<Fn&>>& out, Fn& fn) noexcept {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
      fn();
    } else {
      out.value.emplace(fn());
    }
  } catch (...) {
    out.error = std::current_exception();
  }
}

}  // namespace tern::detail
