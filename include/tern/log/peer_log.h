#pragma once

// Rate-limited logging for lines a remote peer can cause (a bad frame, a slow sender, a reset):
// an attacker must not be able to fill the disk or stall a worker through the log.
//
//   TERN_PEER_LOG_WARN("{}: bad frame header from {}", server, peer);
//
// Every TERN_PEER_LOG_* call of the process goes through one token bucket (a burst, then a
// steady number of lines per second). A line that finds the bucket empty is not logged and is
// counted; the next line that gets through ends with " [N peer lines suppressed]", and the count
// is exported as the counter "log.peer_suppressed". A peer line never waits for long: when the
// writer is behind it is dropped (whatever the Policy), and in synchronous mode it waits at most
// 1 ms for the sink lock and never for a full pipe. See docs/logging.md.

#include <cstdint>

#include "tern/log/log.h"

namespace tern::log {

// The shared limit on peer lines: `burst` lines at once, refilled at `per_second` lines a second.
struct PeerLogRate {
  double per_second = 10;
  std::uint32_t burst = 20;
};

// Changes the limit (a full bucket of the new size). per_second <= 0 or burst 0 silences peer
// lines. Any thread.
void set_peer_log_rate(PeerLogRate rate) noexcept;
// The current limit. Any thread.
PeerLogRate peer_log_rate() noexcept;
// Peer lines suppressed by the limit since the program started. Any thread.
std::uint64_t peer_log_suppressed() noexcept;

namespace detail {

// Whether a peer line may be logged now, and how many were suppressed since the last one that was.
struct PeerAdmission {
  bool admitted;
  std::uint64_t suppressed;
};
// Takes a token from the shared bucket (lock-free, never waits). Any thread.
PeerAdmission peer_log_admit() noexcept;

// Set while the calling thread logs a peer line: the logger drops instead of waiting.
inline constinit thread_local bool peer_line = false;

// Marks the calling thread as logging a peer line for the scope's life. Any thread.
class PeerLineScope {
 public:
  PeerLineScope() noexcept : previous_(peer_line) { peer_line = true; }
  ~PeerLineScope() { peer_line = previous_; }
  PeerLineScope(const PeerLineScope&) = delete;
  PeerLineScope& operator=(const PeerLineScope&) = delete;

 private:
  bool previous_;
};

}  // namespace detail

}  // namespace tern::log

// One rate-limited peer line at `level`; the format must be a string literal.
#define TERN_PEER_LOG_EMIT_(level, format, ...)                                                  \
  do {                                                                                           \
    if (::tern::log::detail::enabled(level)) {                                                   \
      const ::tern::log::detail::PeerAdmission tern_peer_admission_ =                            \
          ::tern::log::detail::peer_log_admit();                                                 \
      if (tern_peer_admission_.admitted) {                                                       \
        const ::tern::log::detail::PeerLineScope tern_peer_scope_;                               \
        if (tern_peer_admission_.suppressed == 0) {                                              \
          TERN_LOG_EMIT_(level, format __VA_OPT__(, ) __VA_ARGS__);                              \
        } else {                                                                                 \
          TERN_LOG_EMIT_(level, format " [{} peer lines suppressed]" __VA_OPT__(, ) __VA_ARGS__, \
                         tern_peer_admission_.suppressed);                                       \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  } while (0)

#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_INFO
#define TERN_PEER_LOG_INFO(...) TERN_PEER_LOG_EMIT_(::tern::log::Level::info, __VA_ARGS__)
#else
#define TERN_PEER_LOG_INFO(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif
#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_WARN
#define TERN_PEER_LOG_WARN(...) TERN_PEER_LOG_EMIT_(::tern::log::Level::warn, __VA_ARGS__)
#else
#define TERN_PEER_LOG_WARN(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif
#if TERN_LOG_MIN_LEVEL <= TERN_LOG_LEVEL_ERROR
#define TERN_PEER_LOG_ERROR(...) TERN_PEER_LOG_EMIT_(::tern::log::Level::error, __VA_ARGS__)
#else
#define TERN_PEER_LOG_ERROR(...) TERN_LOG_DISCARD_(__VA_ARGS__)
#endif
