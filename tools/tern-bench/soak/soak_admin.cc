#include "soak/soak_admin.h"

#include <array>
#include <chrono>

#include <fmt/format.h>

#include "soak/soak_stats.h"
#include "tern/fiber/fiber.h"
#include "tern/net/tcp_stream.h"

namespace tern::bench {

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMaxPageBytes = 32 << 20;
constexpr auto kPollInterval = 100ms;

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

Result<std::string> get_metrics(const net::Address& admin, Deadline deadline, std::string* why) {
  Result<net::TcpStream> stream = net::TcpStream::connect(admin, deadline);
  if (!stream) {
    *why = stream.error().message();  // "connect ADDRESS: why"
    return fail(stream.error());
  }
  const std::string request = fmt::format(
      "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", admin.to_string());
  if (Result<void> sent = stream->write_all(bytes_of(request), deadline); !sent) {
    *why = "sending the request: " + sent.error().message();
    return fail(sent.error());
  }
  std::string response;
  std::array<std::byte, 16384> buf;
  for (;;) {
    Result<std::size_t> n = stream->read(buf, deadline);
    if (!n) {
      *why = "reading the response: " + n.error().message();
      return fail(n.error());
    }
    if (*n == 0) break;
    response.append(reinterpret_cast<const char*>(buf.data()), *n);
    if (response.size() > kMaxPageBytes) {
      *why = "the /metrics page is over 32 MiB";
      return fail(std::errc::message_size);
    }
  }
  return response;
}

}  // namespace

Result<ServerCounts> fetch_server_counts(const net::Address& admin, Deadline deadline,
                                         std::string* why) {
  Result<std::string> response = get_metrics(admin, deadline, why);
  if (!response) return fail(response.error());
  Result<std::string_view> page = http_ok_body(*response, why);
  if (!page) {
    *why = "GET /metrics: " + *why;
    return fail(page.error());
  }
  const std::optional<double> fibers = prometheus_sum(*page, "tern_fibers_alive");
  if (!fibers) {
    *why = "the /metrics page has no tern_fibers_alive";
    return fail(std::errc::invalid_argument);
  }
  ServerCounts counts;
  counts.fibers_alive = *fibers;
  counts.timers_pending = prometheus_sum(*page, "tern_timers_pending");
  counts.connections_open = prometheus_sum(*page, "tern_net_connections_open");
  counts.connections_rejected = prometheus_sum(*page, "tern_net_connections_rejected_total");
  return counts;
}

Result<ServerCounts> quiet_server_counts(const net::Address& admin,
                                         std::chrono::steady_clock::duration within,
                                         std::string* why) {
  const Deadline give_up = Clock::now() + within;
  std::optional<ServerCounts> previous;
  for (;;) {
    Result<ServerCounts> counts =
        fetch_server_counts(admin, std::max(give_up, deadline_after(1s)), why);
    if (!counts) return counts;
    if (previous && previous->fibers_alive == counts->fibers_alive &&
        previous->timers_pending == counts->timers_pending)
      return counts;
    if (Clock::now() >= give_up) return counts;
    previous = *counts;
    if (!this_fiber::sleep_for(kPollInterval)) return counts;
  }
}

bool back_to_baseline(const ServerCounts& baseline, const ServerCounts& now) {
  if (now.fibers_alive > baseline.fibers_alive) return false;
  if (baseline.timers_pending && now.timers_pending &&
      *now.timers_pending > *baseline.timers_pending)
    return false;
  return true;
}

SettleResult wait_for_baseline(const net::Address& admin, const ServerCounts& baseline,
                               std::chrono::steady_clock::duration within) {
  SettleResult result;
  const Clock::time_point start = Clock::now();
  const Deadline give_up = start + within;
  for (;;) {
    std::string why;
    Result<ServerCounts> counts =
        fetch_server_counts(admin, std::max(give_up, deadline_after(1s)), &why);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (counts) {
      result.last = *counts;
      result.error.clear();
      if (back_to_baseline(baseline, *counts)) {
        result.back = true;
        return result;
      }
    } else {
      result.error = why;
    }
    if (Clock::now() >= give_up) return result;
    if (!this_fiber::sleep_for(kPollInterval)) return result;
  }
}

}  // namespace tern::bench
