// The request/echo exchange of the echo, idle and flood scenarios, paced connects, and the
// failure tally every scenario counts in.
#include <cstring>

#include <fmt/format.h>

#include "core/run_support.h"
#include "soak/soak.h"
#include "tern/fiber/fiber.h"

namespace tern::bench {

void FailureTally::add(std::size_t worker, const std::string& kind, std::string message) {
  Slot& slot = slots_[worker];
  ++slot.counts[kind];
  slot.first.try_emplace(kind, std::move(message));
}

std::map<std::string, std::uint64_t> FailureTally::by_kind() const {
  std::map<std::string, std::uint64_t> all;
  for (const Slot& slot : slots_)
    for (const auto& [kind, count] : slot.counts) all[kind] += count;
  return all;
}

std::vector<std::string> FailureTally::first_messages(std::size_t limit) const {
  std::map<std::string, std::string> first;
  for (const Slot& slot : slots_)
    for (const auto& [kind, message] : slot.first) first.try_emplace(kind, message);
  std::vector<std::string> messages;
  for (const auto& [kind, message] : first) {
    if (messages.size() >= limit) break;
    messages.push_back(message);
  }
  return messages;
}

std::uint64_t FailureTally::total() const {
  std::uint64_t sum = 0;
  for (const Slot& slot : slots_)
    for (const auto& [kind, count] : slot.counts) sum += count;
  return sum;
}

Deadline SoakContext::io_deadline() const { return deadline_after(seconds(o.timeout_s)); }

void fill_request(std::span<std::byte> request, std::uint64_t connection, std::uint64_t seq) {
  std::uint64_t state =
      (connection + 1) * 0x9E3779B97F4A7C15ULL ^ (seq + 1) * 0xC2B2AE3D27D4EB4FULL;
  for (std::size_t i = 0; i < request.size(); ++i) {
    state ^= state >> 29;
    state *= 0xBF58476D1CE4E5B9ULL;
    request[i] = static_cast<std::byte>(state >> 56);
  }
}

std::optional<ExchangeFailure> echo_round_trip(net::TcpStream& stream,
                                               std::span<const std::byte> request,
                                               std::span<std::byte> reply, Deadline deadline) {
  if (Result<void> sent = stream.write_all(request, deadline); !sent)
    return ExchangeFailure{"write: " + sent.error().message(), sent.error().message()};
  std::size_t got = 0;
  while (got < reply.size()) {
    Result<std::size_t> n = stream.read(reply.subspan(got), deadline);
    if (!n)
      return ExchangeFailure{"read: " + n.error().message(),
                             fmt::format("{} after {} of {} bytes of the echo", n.error().message(),
                                         got, reply.size())};
    if (*n == 0)
      return ExchangeFailure{
          "the server closed the connection",
          fmt::format("end of stream after {} of {} bytes of the echo", got, reply.size())};
    got += *n;
  }
  if (std::memcmp(request.data(), reply.data(), request.size()) != 0) {
    std::size_t at = 0;
    while (request[at] == reply[at]) ++at;
    return ExchangeFailure{
        "the echo differs from the request",
        fmt::format("the echo differs from the request at byte {} of {}", at, request.size())};
  }
  return std::nullopt;
}

Result<net::TcpStream> connect_paced(const net::Address& address, Semaphore& in_flight,
                                     Deadline deadline) {
  if (Result<void> permit = in_flight.acquire_until(deadline); !permit) return fail(permit.error());
  Result<net::TcpStream> stream = net::TcpStream::connect(address, deadline);
  in_flight.release();
  return stream;
}

std::vector<std::unique_ptr<Semaphore>> per_worker_semaphores(std::size_t workers,
                                                              std::size_t permits) {
  std::vector<std::unique_ptr<Semaphore>> semaphores;
  for (std::size_t i = 0; i < workers; ++i)
    semaphores.push_back(std::make_unique<Semaphore>(permits));
  return semaphores;
}

std::string echo_primer(const SoakContext& context) {
  Result<net::TcpStream> stream = net::TcpStream::connect(context.address, context.io_deadline());
  if (!stream) return "connect: " + stream.error().message();
  (void)stream->set_nodelay();
  std::vector<std::byte> request(context.o.message_bytes);
  std::vector<std::byte> reply(request.size());
  fill_request(request, ~std::uint64_t{0}, 0);
  if (std::optional<ExchangeFailure> failed =
          echo_round_trip(*stream, request, reply, context.io_deadline()))
    return failed->detail;
  return {};
}

double run_timed_load(SoakContext& context, Event& go, Deadline& end, WaitGroup& done) {
  context.monitor.set_phase("load");
  context.monitor.mark_load_start();
  const Clock::time_point start = Clock::now();
  end = start + seconds(context.o.net.duration_s);
  go.set();
  (void)this_fiber::sleep_until(end);
  context.monitor.mark_load_end();
  (void)done.wait();
  return seconds_between(start, Clock::now());
}

}  // namespace tern::bench
