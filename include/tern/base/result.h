#pragma once

#include <expected>
#include <system_error>

namespace tern {

// The outcome of an operation that can fail: a value or an error code. Usable from any thread.
template <typename T>
using Result = std::expected<T, std::error_code>;

// tern's own error conditions, for failures that std::errc has no name for.
enum class Errc {
  closed = 1,  // the channel, queue or object was closed
  lagged,      // a broadcast subscriber fell behind and missed messages
  stopped,     // the runtime has stopped and accepts no more work
  eof,         // the stream ended before the expected number of bytes
};

// The error category of tern::Errc. Usable from any thread.
const std::error_category& error_category() noexcept;

// Makes an error_code from a tern::Errc. Usable from any thread.
inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// Shorthand for an unexpected error_code built from a std::errc. Usable from any thread.
inline std::unexpected<std::error_code> fail(std::errc e) noexcept {
  return std::unexpected(std::make_error_code(e));
}

// Shorthand for an unexpected error_code built from a tern::Errc. Usable from any thread.
inline std::unexpected<std::error_code> fail(Errc e) noexcept {
  return std::unexpected(make_error_code(e));
}

// Shorthand for an unexpected error_code. Usable from any thread.
inline std::unexpected<std::error_code> fail(std::error_code ec) noexcept {
  return std::unexpected(ec);
}

}  // namespace tern

template <>
struct std::is_error_code_enum<tern::Errc> : std::true_type {};
