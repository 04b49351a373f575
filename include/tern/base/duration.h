#pragma once

#include <chrono>
#include <string_view>

#include "tern/base/result.h"

namespace tern {

// Parses a duration written as a number and a unit: "250us", "1.5ms", "10s", "1m", "2h" (units
// ns, us, ms, s, m, h); "0" and "off" are zero. Fails with invalid_argument on anything else,
// a negative number, or one past about 290 years. Any thread.
[[nodiscard]] Result<std::chrono::nanoseconds> parse_duration(std::string_view text) noexcept;

}  // namespace tern
