#pragma once

#include <expected>
#include <string_view>
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

// The error of a call whose deadline passed (a read, write, connect or wait of tern::io and
// tern::net): message() says "deadline exceeded", value() is ETIMEDOUT, and it compares equal to
// std::errc::timed_out. Any thread.
std::error_code deadline_exceeded() noexcept;

// `code` with text about where it happened: message() reads "<context>: <code's message>"
// (e.g. "bind 127.0.0.1:8080: Address already in use"), value() is code.value(), and it compares
// equal (==) to the same std::errc and other error conditions as code; only a comparison of
// categories, or of error_codes (not conditions), tells the two apart (see without_context).
// The context is kept for the life of the process: distinct contexts are capped (a few
// thousand; past the cap, and for codes of tern::Errc, which compare as error_codes, code is
// returned as it is). Any thread.
std::error_code with_context(std::error_code code, std::string_view context);

// As with_context, but message() is `explanation` alone (e.g. Address::parse's "'1.2.3.4':
// missing port ..."). Any thread.
std::error_code with_explanation(std::error_code code, std::string_view explanation);

// The code with_context or with_explanation started from (code itself otherwise). Any thread.
std::error_code without_context(std::error_code code) noexcept;

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
