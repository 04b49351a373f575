#pragma once

// tern::log: an asynchronous logger. A call encodes its arguments (or, for argument types that
// cannot be copied safely, the formatted message) into a buffer owned by the calling thread, with
// no lock or allocation; one background thread formats the lines and writes them to the sinks.
//
//   TERN_LOG_INFO("accepted {} from {}", fd, peer);   // fmt syntax, checked at compile time
//
// Line: "2026-11-21 13:45:07.123456 INFO  w0 f'conn'#12 tcp_server.cc:88 accepted 5 from ..."
// (UTC, microseconds; the thread is "wN f'name'#id" on a fiber, "tTID" on a plain thread).
// Without init() the logger is synchronous, writes to stderr and shows INFO and above.
// See docs/logging.md.

#include <cstdint>

#include "tern/base/result.h"
#include "tern/log/detail/record.h"
#include "tern/log/level.h"
#include "tern/log/options.h"
#include "tern/log/sink.h"

// Calls below this level compile to nothing (their arguments are not evaluated); FATAL is always
// compiled. Define it (to a TERN_LOG_LEVEL_* value) before including this header or on the
// compiler's command line.
#ifndef TERN_LOG_MIN_LEVEL
#define TERN_LOG_MIN_LEVEL TERN_LOG_LEVEL_TRACE
#endif

namespace tern::log {

// Sets the logger up (after flushing and closing any previous setup); opens options.file.
// Call from one thread at a time; logging from other threads meanwhile is safe, and a record
// logged during the switch goes to the old or the new sinks.
[[nodiscard]] Result<void> init(Options options);
// Writes every record out, flushes the sinks, stops the writer thread and returns to the default
// (synchronous, stderr, INFO). Called at exit if init() was. Same threads as init().
void shutdown();
// Returns once every record logged before the call (by any thread) is written to the sinks and
// the sinks are flushed. Any thread.
void flush();

// Changes the run-time level. Any thread.
void set_level(Level level) noexcept;
// The run-time level. Any thread.
Level level() noexcept;

// Records dropped under Policy::drop since the program started (exact). Any thread.
std::uint64_t dropped() noexcept;
// Records written to the sinks since the program started (lines the writer adds, such as
// "N messages dropped", are not counted). Also exported as the counter "log.written". Any thread.
std::uint64_t written() noexcept;

// Installs the thread/fiber context provider (the fiber layer does; nullptr removes it).
// Any thread.
void set_context_provider(ContextProvider provider) noexcept;

// Handles SIGSEGV, SIGBUS, SIGABRT, SIGFPE and SIGILL: writes out what every thread logged so far
// (best effort), then restores the previous handler and re-raises. Any thread.
void install_crash_handler();
// Best-effort flush for a crashing process (signal handlers): writes what every ring holds,
// waiting at most half a second for a lock and allocating nothing for lines under 64 KiB.
// Any thread.
void emergency_flush() noexcept;

}  // namespace tern::log

// One call at `level`; the format must be a string literal.
#define TERN_LOG_EMIT_(level, format, ...)                                                         \
  do {                                                                                             \
    if (::tern::log::detail::enabled(level)) {                                                     \
      static constinit ::tern::log::detail::SiteCache tern_log_cache_;                             \
      static constexpr ::tern::log::detail::Site tern_log_site_{                                   \
          level, __LINE__, ::tern::log::detail::base_name(__FILE__), "" format, &tern_log_cache_}; \
      ::tern::log::detail::emit(tern_log_site_, format __VA_OPT__(, ) __VA_ARGS__);                \
    }                                                                                              \
  } while (0)

// A compiled-out call: the format is still checked, the arguments are never evaluated.
#define TERN_LOG_DISCARD_(format, ...)                                                         \
  do {                                                                                         \
    if constexpr (false) ::tern::log::detail::check_format(format __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)

#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_TRACE
#define TERN_LOG_TRACE(...) TERN_LOG_EMIT_(::tern::log::Level::trace, __VA_ARGS__)
#else
#define TERN_LOG_TRACE(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif
#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_DEBUG
#define TERN_LOG_DEBUG(...) TERN_LOG_EMIT_(::tern::log::Level::debug, __VA_ARGS__)
#else
#define TERN_LOG_DEBUG(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif
#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_INFO
#define TERN_LOG_INFO(...) TERN_LOG_EMIT_(::tern::log::Level::info, __VA_ARGS__)
#else
#define TERN_LOG_INFO(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif
#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_WARN
#define TERN_LOG_WARN(...) TERN_LOG_EMIT_(::tern::log::Level::warn, __VA_ARGS__)
#else
#define TERN_LOG_WARN(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif
#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_ERROR
#define TERN_LOG_ERROR(...) TERN_LOG_EMIT_(::tern::log::Level::error, __VA_ARGS__)
#else
#define TERN_LOG_ERROR(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif

// Logs at FATAL whatever the levels, flushes every thread's records and the sinks, and aborts.
#define TERN_LOG_FATAL(format, ...)                                                               \
  do {                                                                                            \
    static constinit ::tern::log::detail::SiteCache tern_log_cache_;                              \
    static constexpr ::tern::log::detail::Site tern_log_site_{                                    \
        ::tern::log::Level::fatal, __LINE__, ::tern::log::detail::base_name(__FILE__), "" format, \
        &tern_log_cache_};                                                                        \
    ::tern::log::detail::emit(tern_log_site_, format __VA_OPT__(, ) __VA_ARGS__);                 \
    ::tern::log::detail::fatal_exit();                                                            \
  } while (0)
