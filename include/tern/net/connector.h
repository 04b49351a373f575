#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/tcp_stream.h"

namespace tern::net {

// How a Connector retries.
struct ConnectorOptions {
  std::chrono::milliseconds initial_backoff{100};    // wait after the first failure
  std::chrono::milliseconds max_backoff{10'000};     // the backoff never grows past this
  double multiplier = 2.0;                           // backoff growth per failure
  double jitter = 0.2;                               // +/- this fraction, so clients spread out
  std::chrono::milliseconds attempt_timeout{5'000};  // deadline of one connect attempt
};

// An outgoing connection that reconnects: connect() retries with exponential backoff and
// jitter until it succeeds or its deadline passes; a success resets the backoff. Use it in a
// loop: connect, serve the stream until it fails, connect again. Worker fibers of one worker.
class Connector {
 public:
  // target: "host:port", "[v6]:port", "tcp://host:port" or "unix:/path".
  explicit Connector(std::string target, ConnectorOptions options = {});

  // Connects, retrying on failure; fails with the last error at the deadline (timed_out) or
  // when interrupted (operation_canceled).
  [[nodiscard]] Result<TcpStream> connect(Deadline deadline = kNoDeadline);

  // Failed attempts since the last success.
  std::uint32_t failures() const noexcept { return failures_; }
  // The backoff the next failure will wait (before jitter).
  std::chrono::milliseconds next_backoff() const noexcept { return backoff_; }
  const std::string& target() const noexcept { return target_; }

 private:
  std::string target_;
  ConnectorOptions options_;
  std::chrono::milliseconds backoff_;
  std::uint32_t failures_ = 0;
  std::uint64_t random_state_;
};

}  // namespace tern::net
