#include "tern/fiber/runtime.h"
#include "tern/base/signal_mask.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "futex_parker.h"
#include "log_context.h"
#include "runtime_state.h"
#include "scheduler.h"
#include "tern/base/assert.h"
#include "tern/base/duration.h"
#include "tern/log/log.h"
#include "tern/prof/loop_profiler.h"

namespace tern {

namespace detail {

std::atomic<std::uint64_t> RuntimeState::next_fiber_id{1};

namespace {

std::size_t usable_cpus() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return static_cast<std::size_t>(count);
  }
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? hardware : 1;
}

}  // namespace

RuntimeState::RuntimeState(Runtime* owner, RuntimeOptions options)
    : owner_(owner),
      options_(std::move(options)),
      worker_count_(options_.workers > 0 ? options_.workers : usable_cpus()) {}

}  // namespace detail

namespace {

std::atomic<std::unique_ptr<Parker> (*)(std::size_t)> default_parker_factory{nullptr};

constexpr std::size_t kMaxStartHooks = 8;
std::atomic<RuntimeStartHook> start_hooks[kMaxStartHooks] = {};
std::atomic<std::size_t> start_hook_count{0};

// The duration in the environment variable `name`, parsed by `parse`: zero when it is unset or
// empty. A value that does not parse ends the program, as a bad value of every TERN_ variable
// does (docs/guide.md, "Environment variables"): the message names the variable, its value and
// what it accepts.
template <typename Duration, typename Parse>
Duration duration_from_environment(const char* name, Parse parse, std::string_view accepted) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return Duration(0);
  Result<Duration> parsed = parse(value);
  if (!parsed) TERN_FATAL("{}='{}' is not valid: expected {}", name, value, accepted);
  return *parsed;
}

// The profiler interval: the option, else TERN_PROF (read once; a bad value is fatal).
std::chrono::nanoseconds prof_interval(const RuntimeOptions& options) {
  if (options.prof_interval) return std::max(*options.prof_interval, std::chrono::milliseconds(0));
  static const std::chrono::milliseconds from_environment = [] {
    const std::chrono::milliseconds interval = duration_from_environment<std::chrono::milliseconds>(
        "TERN_PROF", prof::parse_interval,
        "an interval of at least 1ms such as 10s, 500ms or 1m, or 0 or off (unset means off)");
    if (!TERN_PROF_ENABLED && interval.count() > 0)
      TERN_LOG_WARN("TERN_PROF={} is ignored: tern was built with -DTERN_PROF=OFF",
                    std::getenv("TERN_PROF"));
    return interval;
  }();
  return from_environment;
}

// How long idle workers poll before they sleep: the option, else TERN_IDLE_POLL (read once; a
// bad value is fatal).
std::chrono::nanoseconds idle_poll(const RuntimeOptions& options) {
  if (options.idle_poll) return std::max(*options.idle_poll, std::chrono::microseconds(0));
  static const std::chrono::microseconds from_environment =
      duration_from_environment<std::chrono::microseconds>(
          "TERN_IDLE_POLL", parse_idle_poll,
          "a duration of at most 1s such as 200us or 1ms, or 0 or off (unset means off)");
  return from_environment;
}

// Says once why an admin endpoint that was asked for will not start.
void check_admin_request(const RuntimeOptions& options) {
  if (start_hook_count.load(std::memory_order_acquire) > 0) return;
  const char* value = std::getenv("TERN_ADMIN");
  const bool wanted =
      options.admin_address ? !options.admin_address->empty() : value != nullptr && *value != '\0';
  if (!wanted) return;
  static std::once_flag said;
  std::call_once(said, [] {
    TERN_LOG_WARN(
        "an admin endpoint was asked for (TERN_ADMIN or admin_address) but this program does "
        "not link tern::admin (tern::tern includes it), which serves it");
  });
}

std::unique_ptr<Parker> make_parker(const RuntimeOptions& options, std::size_t worker) {
  if (options.make_parker) {
    std::unique_ptr<Parker> parker = options.make_parker(worker);
    if (parker) return parker;
  }
  if (auto factory = default_parker_factory.load(std::memory_order_acquire)) {
    std::unique_ptr<Parker> parker = factory(worker);
    if (parker) return parker;
  }
  return std::make_unique<detail::FutexParker>();
}

}  // namespace

void set_default_parker_factory(std::unique_ptr<Parker> (*factory)(std::size_t)) noexcept {
  default_parker_factory.store(factory, std::memory_order_release);
}

void add_runtime_start_hook(RuntimeStartHook hook) noexcept {
  const std::size_t index = start_hook_count.fetch_add(1, std::memory_order_acq_rel);
  TERN_ASSERT(index < kMaxStartHooks, "tern::add_runtime_start_hook: too many hooks");
  start_hooks[index].store(hook, std::memory_order_release);
}

Result<std::chrono::microseconds> parse_idle_poll(std::string_view text) noexcept {
  Result<std::chrono::nanoseconds> parsed = parse_duration(text);
  if (!parsed || *parsed > kMaxIdlePoll) return fail(std::errc::invalid_argument);
  return std::chrono::duration_cast<std::chrono::microseconds>(*parsed);
}

Runtime::Runtime(RuntimeOptions options)
    : state_(std::make_unique<detail::RuntimeState>(this, std::move(options))) {
  detail::register_log_context();
}

Runtime::~Runtime() = default;

std::size_t Runtime::workers() const noexcept { return state_->worker_count(); }

Runtime* Runtime::current() noexcept {
  detail::Scheduler* scheduler = detail::Scheduler::current();
  return scheduler != nullptr ? scheduler->runtime()->owner() : nullptr;
}

void Runtime::run_erased(std::move_only_function<void()> fn) {
  TERN_ASSERT(detail::Scheduler::current() == nullptr,
              "Runtime::run called from a worker thread; use spawn or post instead");
  bool expected = false;
  TERN_ASSERT(state_->running.compare_exchange_strong(expected, true),
              "Runtime::run is already running on another thread");

  const std::size_t count = state_->worker_count();
  const detail::Scheduler::LoopSettings loop{
      .prof_interval = prof_interval(state_->options()),
      .idle_poll = idle_poll(state_->options()),
      .idle_poll_on_busy_cpus = state_->options().idle_poll_on_busy_cpus};
  check_admin_request(state_->options());
  state_->schedulers.clear();
  state_->schedulers.resize(count);
  std::latch constructed(static_cast<std::ptrdiff_t>(count));
  std::vector<std::thread> threads;
  threads.reserve(count - 1);
  ProcessSignalsBlocked blocked;  // the workers started here inherit it
  for (std::size_t i = 1; i < count; ++i) {
    threads.emplace_back([this, i, loop, &constructed] {
      state_->schedulers[i] =
          std::make_unique<detail::Scheduler>(state_.get(), i, make_parker(state_->options(), i));
      detail::Scheduler* scheduler = state_->schedulers[i].get();
      scheduler->configure(loop);
      constructed.count_down();
      scheduler->run();
    });
  }
  blocked.restore();
  state_->schedulers[0] =
      std::make_unique<detail::Scheduler>(state_.get(), 0, make_parker(state_->options(), 0));
  state_->schedulers[0]->configure(loop);
  constructed.count_down();
  constructed.wait();
  {
    std::unique_lock lock(state_->outside_posts);
    state_->accepting = true;
  }

  const std::size_t hooks =
      std::min(start_hook_count.load(std::memory_order_acquire), kMaxStartHooks);
  for (std::size_t i = 0; i < hooks; ++i) {
    RuntimeStartHook hook = start_hooks[i].load(std::memory_order_acquire);
    if (hook == nullptr) continue;
    auto task = std::make_unique<detail::PostedTask>();
    task->fn = [this, hook] { hook(state_->options()); };
    state_->schedulers[0]->post(std::move(task));
  }
  auto first = std::make_unique<detail::PostedTask>();
  first->fn = [this, fn = std::move(fn)]() mutable {
    fn();
    for (auto& scheduler : state_->schedulers) scheduler->request_stop();
  };
  state_->schedulers[0]->post(std::move(first));
  state_->schedulers[0]->run();
  for (std::thread& thread : threads) thread.join();
  std::unique_lock lock(state_->outside_posts);
  state_->accepting = false;
  state_->schedulers.clear();
  state_->running.store(false);
}

Result<void> Runtime::post(std::size_t worker, std::move_only_function<void()> fn) {
  TERN_ASSERT(worker < state_->worker_count(), "Runtime::post: no such worker");
  auto task = std::make_unique<detail::PostedTask>();
  task->fn = std::move(fn);
  detail::Scheduler* here = detail::Scheduler::current();
  if (here != nullptr && here->runtime() == state_.get()) {
    if (!state_->schedulers[worker]->post(std::move(task))) return fail(Errc::stopped);
    return {};
  }
  std::shared_lock lock(state_->outside_posts);
  if (!state_->accepting || !state_->schedulers[worker]->post(std::move(task)))
    return fail(Errc::stopped);
  return {};
}

Result<void> post(std::size_t worker, std::move_only_function<void()> fn) {
  Runtime* runtime = Runtime::current();
  if (runtime == nullptr) {
    TERN_FATAL(
        "tern::post called outside a tern::Runtime: call it from a fiber (inside Runtime::run), "
        "or use Runtime::post from other threads");
  }
  return runtime->post(worker, std::move(fn));
}

namespace this_worker {

std::size_t index() noexcept {
  detail::Scheduler* scheduler = detail::Scheduler::current();
  if (scheduler == nullptr) {
    TERN_FATAL(
        "tern::this_worker::index called outside a tern::Runtime: call it from a fiber (inside "
        "Runtime::run)");
  }
  return scheduler->index();
}

std::size_t count() noexcept {
  detail::Scheduler* scheduler = detail::Scheduler::current();
  if (scheduler == nullptr) {
    TERN_FATAL(
        "tern::this_worker::count called outside a tern::Runtime: call it from a fiber (inside "
        "Runtime::run)");
  }
  return scheduler->runtime()->worker_count();
}

}  // namespace this_worker

}  // namespace tern
