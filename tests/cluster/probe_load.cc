// ProbeLoad: caller fibers and the records of their calls.
#include "probe_load.h"

#include <algorithm>
#include <map>

#include "fmt/format.h"
#include "tern/fiber/fiber.h"

namespace cluster_test {

using namespace std::chrono_literals;

ProbeLoad::ProbeLoad(tern::rpc::Channel& channel, int callers, std::chrono::milliseconds timeout)
    : client_(channel), callers_(callers), timeout_(timeout) {}

ProbeLoad::~ProbeLoad() { stop(); }

void ProbeLoad::start() {
  stop_ = false;
  running_ = true;
  for (int i = 0; i < callers_; ++i) {
    done_.add();
    tern::spawn([this, i] {
      call_until_stopped(static_cast<std::uint64_t>(i));
      done_.done();
    }).detach();
  }
}

void ProbeLoad::stop() {
  if (!running_) return;
  stop_ = true;
  (void)done_.wait();
  running_ = false;
}

void ProbeLoad::call_until_stopped(std::uint64_t caller) {
  tern::cluster_test::WhoRequest request;
  for (std::uint64_t seq = caller << 32; !stop_; ++seq) {
    request.set_seq(seq);
    tern::rpc::ClientContext context;
    context.set_timeout(timeout_);
    context.set_idempotent();
    CallRecord record;
    record.start = tern::Clock::now();
    tern::rpc::Result<tern::cluster_test::WhoReply> reply = client_.Whoami(context, request);
    record.end = tern::Clock::now();
    record.attempts = context.attempts();
    if (reply && reply->seq() == seq) {
      record.server = reply->server();
    } else {
      record.code = reply ? tern::rpc::StatusCode::internal : reply.error().code();
      if (first_failure_.empty()) {
        first_failure_ = reply ? "a reply to another call" : reply.error().to_string();
      }
    }
    const bool failed = record.code != tern::rpc::StatusCode::ok;
    calls_.push_back(std::move(record));
    // A client that pauses after a failure, as real ones do, rather than spinning.
    if (failed) (void)tern::this_fiber::sleep_for(1ms);
  }
}

std::size_t ProbeLoad::failed() const {
  return static_cast<std::size_t>(std::count_if(calls_.begin(), calls_.end(), [](const auto& c) {
    return c.code != tern::rpc::StatusCode::ok;
  }));
}

std::chrono::nanoseconds ProbeLoad::longest() const {
  std::chrono::nanoseconds longest{0};
  for (const CallRecord& call : calls_) longest = std::max(longest, call.end - call.start);
  return longest;
}

std::size_t ProbeLoad::served_by(const std::string& server, tern::Clock::time_point from) const {
  return static_cast<std::size_t>(std::count_if(calls_.begin(), calls_.end(), [&](const auto& c) {
    return c.start >= from && c.server == server;
  }));
}

std::optional<tern::Clock::time_point> ProbeLoad::first_ok(tern::Clock::time_point from,
                                                           const std::string& server,
                                                           std::uint32_t min_attempts) const {
  std::optional<tern::Clock::time_point> first;
  for (const CallRecord& call : calls_) {
    if (call.start < from || call.server.empty() || call.attempts < min_attempts) continue;
    if (!server.empty() && call.server != server) continue;
    if (!first || call.end < *first) first = call.end;
  }
  return first;
}

std::string ProbeLoad::summary() const {
  std::map<std::string, std::size_t> outcomes;
  for (const CallRecord& call : calls_) {
    ++outcomes[call.server.empty() ? std::string(tern::rpc::status_code_name(call.code))
                                   : "ok from " + call.server];
  }
  std::string text = fmt::format("{} calls:", calls_.size());
  for (const auto& [what, count] : outcomes) text += fmt::format(" {} {};", count, what);
  text += fmt::format(" longest {:.1f} ms", ms_between({}, tern::Clock::time_point{} + longest()));
  if (!first_failure_.empty()) text += "; first failure: " + first_failure_;
  return text;
}

double ms_between(tern::Clock::time_point from, tern::Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace cluster_test
