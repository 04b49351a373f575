#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "tern/log/detail/record.h"

namespace tern::log::detail {

// Where a message is formatted: a growing buffer (the writer's batch, a synchronous caller's
// line, or the crash path's pre-reserved line).
struct Output {
  fmt::memory_buffer& buffer;
};

// The text of the current UTC second ("2026-11-21 13:45:07"), rebuilt only when the second
// changes. One per formatting thread.
class DateCache {
 public:
  // Length of "YYYY-MM-DD HH:MM:SS.uuuuuu".
  static constexpr std::size_t kTextSize = 26;
  // Writes that text for a CLOCK_REALTIME time in nanoseconds at `at`; returns its end.
  char* write(char* at, std::uint64_t ns) noexcept;

 private:
  std::int64_t second_ = -1;
  char text_[20] = {};  // up to and including the '.'
};

// Makes room for `bytes` more bytes at the end of out and returns where they start; the caller
// then sets out's size to the end of what it wrote.
char* grow_by(fmt::memory_buffer& out, std::size_t bytes);

// Appends "<date time> <LEVEL> <context> <file>:<line> " for one record.
void append_prefix(fmt::memory_buffer& out, DateCache& date, std::uint64_t ns, const Site& site,
                   std::string_view context);

// Cuts the message that starts at `start` to kMaxMessageBytes (on a UTF-8 boundary) and marks
// it, if it is longer or `truncated` is set; then ends the line.
void finish_line(fmt::memory_buffer& out, std::size_t start, bool truncated);

// Where a cut message should end so that no UTF-8 sequence is split: at most `limit`.
std::size_t utf8_cut(std::string_view text, std::size_t limit) noexcept;

// The marker a cut message ends with.
inline constexpr std::string_view kTruncatedMarker = " [truncated]";

}  // namespace tern::log::detail
