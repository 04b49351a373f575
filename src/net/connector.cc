#include "tern/net/connector.h"

#include <algorithm>

#include "tern/fiber/fiber.h"

namespace tern::net {

namespace {

// A small xorshift generator: jitter needs spread, not quality.
double next_unit(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);
}

}  // namespace

Connector::Connector(std::string target, ConnectorOptions options)
    : target_(std::move(target)),
      options_(options),
      backoff_(options.initial_backoff),
      random_state_((reinterpret_cast<std::uintptr_t>(this) ^
                     static_cast<std::uint64_t>(Clock::now().time_since_epoch().count())) |
                    1) {}

Result<TcpStream> Connector::connect(Deadline deadline) {
  for (;;) {
    const Deadline attempt_deadline = std::min(deadline, deadline_after(options_.attempt_timeout));
    Result<TcpStream> stream = TcpStream::connect(target_, attempt_deadline);
    if (stream) {
      failures_ = 0;
      backoff_ = options_.initial_backoff;
      return stream;
    }
    ++failures_;
    if (stream.error() == std::errc::operation_canceled ||
        stream.error() == std::errc::invalid_argument)
      return stream;
    const double spread = 1.0 + options_.jitter * (2.0 * next_unit(random_state_) - 1.0);
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(backoff_ * spread);
    backoff_ = std::min(options_.max_backoff, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  backoff_ * options_.multiplier));
    // No point waiting for a retry that could not start before the deadline.
    if (deadline != kNoDeadline && Clock::now() + wait >= deadline)
      return fail(with_context(deadline_exceeded(), "connect " + target_));
    if (Result<void> slept = this_fiber::sleep_for(wait); !slept) return fail(slept.error());
  }
}

}  // namespace tern::net
