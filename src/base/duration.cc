#include "tern/base/duration.h"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace tern {

namespace {

// Nanoseconds per unit, or 0 for an unknown unit.
double nanoseconds_per(std::string_view unit) noexcept {
  if (unit == "ns") return 1;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  if (unit == "m") return 60e9;
  if (unit == "h") return 3600e9;
  return 0;
}

}  // namespace

Result<std::chrono::nanoseconds> parse_duration(std::string_view text) noexcept {
  if (text == "0" || text == "off") return std::chrono::nanoseconds(0);
  double number = 0;
  const char* end = text.data() + text.size();
  const std::from_chars_result parsed = std::from_chars(text.data(), end, number);
  if (parsed.ec != std::errc() || !std::isfinite(number) || number < 0)
    return fail(std::errc::invalid_argument);
  const double scale =
      nanoseconds_per(std::string_view(parsed.ptr, static_cast<std::size_t>(end - parsed.ptr)));
  const double ns = number * scale;
  if (scale == 0 || ns > 9e18) return fail(std::errc::invalid_argument);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

}  // namespace tern
