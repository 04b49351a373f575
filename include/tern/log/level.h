#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// The severity of a log record. The numeric values match the TERN_LOG_LEVEL_* macros that
// TERN_LOG_MIN_LEVEL is compared with.
#define TERN_LOG_LEVEL_TRACE 0
#define TERN_LOG_LEVEL_DEBUG 1
#define TERN_LOG_LEVEL_INFO 2
#define TERN_LOG_LEVEL_WARN 3
#define TERN_LOG_LEVEL_ERROR 4
#define TERN_LOG_LEVEL_FATAL 5

namespace tern::log {

// Severity of a record, from the most verbose to the one that aborts the process.
enum class Level : std::uint8_t {
  trace = TERN_LOG_LEVEL_TRACE,
  debug = TERN_LOG_LEVEL_DEBUG,
  info = TERN_LOG_LEVEL_INFO,
  warn = TERN_LOG_LEVEL_WARN,
  error = TERN_LOG_LEVEL_ERROR,
  fatal = TERN_LOG_LEVEL_FATAL,
};

// The level as it appears in a line, padded to five characters ("INFO ", "ERROR"). Any thread.
constexpr std::string_view padded_name(Level level) noexcept {
  constexpr std::string_view kNames[] = {"TRACE", "DEBUG", "INFO ", "WARN ", "ERROR", "FATAL"};
  const auto index = static_cast<std::size_t>(level);
  return index < 6 ? kNames[index] : std::string_view("?????");
}

}  // namespace tern::log
