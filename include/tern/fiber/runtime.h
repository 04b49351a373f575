#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tern/base/outcome.h"
#include "tern/base/result.h"
#include "tern/fiber/park.h"

namespace tern {

namespace detail {
class RuntimeState;
}

// The longest idle poll accepted from TERN_IDLE_POLL (and from tern's tools' --idle-poll).
inline constexpr std::chrono::seconds kMaxIdlePoll{1};

// Parses an idle poll time as TERN_IDLE_POLL and the tools' --idle-poll take it ("200us", "1ms";
// "0" or "off": none); fails with invalid_argument on anything else or past kMaxIdlePoll. Any
// thread.
[[nodiscard]] Result<std::chrono::microseconds> parse_idle_poll(std::string_view text) noexcept;

// How to build a Runtime.
struct RuntimeOptions {
  // Worker threads, each with its own scheduler; 0 means one per CPU the process may use.
  std::size_t workers = 0;
  // Makes the idle-wait for worker i, on that worker's thread; empty means a futex-based
  // parker that only wakes for timers and posts (tern::io installs its reactor here).
  std::function<std::unique_ptr<Parker>(std::size_t worker)> make_parker{};
  // While shutting down, how often to print which fibers are still running.
  std::chrono::milliseconds shutdown_report_interval{5000};
  // The loop profiler: each worker times its loop phases and reports them every interval
  // (docs/observability.md). Unset: the TERN_PROF environment variable decides ("10s",
  // "500ms", "1m"); zero: off.
  std::optional<std::chrono::milliseconds> prof_interval{};
  // Receives each profiler report on the reporting worker; empty: the report is logged.
  std::function<void(std::size_t worker, std::string_view table)> prof_report{};
  // How long an idle worker keeps polling for work (its reactor, posts, timers) before it
  // sleeps: a wake-up then costs a poll instead of a sleeping thread's wake-up, at the price of
  // that much CPU per idle spell (seastar's idle poll). A worker polls only while the machine's
  // runnable threads, its own included, fit in its CPUs (/proc/loadavg, read at most once a
  // millisecond); when other threads want every CPU it sleeps at once and leaves them the CPU.
  // Unset: the TERN_IDLE_POLL environment variable decides ("200us", "1ms"); zero, the
  // default: sleep at once.
  std::optional<std::chrono::microseconds> idle_poll{};
  // Polls for idle_poll even when other runnable threads want every CPU: for workers on CPUs
  // reserved for them (isolcpus, a dedicated machine) while the rest of the machine is busy.
  bool idle_poll_on_busy_cpus = false;
  // The admin HTTP endpoint ("127.0.0.1:9100"; port 0 lets the kernel pick), served by fibers
  // on worker 0 when tern::net is linked: GET /metrics and GET /status. Unset: the TERN_ADMIN
  // environment variable decides; empty: off.
  std::optional<std::string> admin_address{};
};

// A set of worker threads, each running its own fiber scheduler. Fibers stay on the worker
// that spawned them; work moves between workers only through post().
class Runtime {
 public:
  // Prepares a runtime; threads start in run(). Any thread.
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Starts the workers (the calling thread becomes worker 0), runs fn in a fiber on worker 0
  // (after the fibers of the start hooks) and, once fn returns, shuts down: every interruptible
  // wait ends with operation_canceled, and run returns fn's result (or rethrows its exception) when
  // every fiber and posted task has finished. Not from a worker of this runtime.
  template <typename Fn>
  std::invoke_result_t<Fn&> run(Fn&& fn);

  // The number of workers.
  std::size_t workers() const noexcept;

  // Runs fn in a new fiber on worker `worker`. Fails with Errc::stopped when the runtime is
  // not running or that worker has already shut down; work accepted is never dropped.
  // Any thread.
  [[nodiscard]] Result<void> post(std::size_t worker, std::move_only_function<void()> fn);

  // The runtime the calling worker belongs to, or nullptr off the workers. Any thread.
  static Runtime* current() noexcept;

 private:
  void run_erased(std::move_only_function<void()> fn);
  std::unique_ptr<detail::RuntimeState> state_;
};

template <typename Fn>
std::invoke_result_t<Fn&> Runtime::run(Fn&& fn) {
  detail::Outcome<std::invoke_result_t<Fn&>> outcome;
  run_erased([&] { detail::capture(outcome, fn); });
  return outcome.get();
}

// A function every Runtime runs in a fiber on worker 0 when it starts, before run()'s fn; layers
// above the fiber layer register one at static initialization to start their services (tern::net
// starts the admin endpoint). At most 8. Any thread, before the runtimes it should affect start.
using RuntimeStartHook = void (*)(const RuntimeOptions& options);
void add_runtime_start_hook(RuntimeStartHook hook) noexcept;

// Runs fn in a new fiber on worker `worker` of the current runtime. Worker threads only.
[[nodiscard]] Result<void> post(std::size_t worker, std::move_only_function<void()> fn);

namespace this_worker {
// The index of the calling worker in its runtime. Worker threads only.
std::size_t index() noexcept;
// The number of workers in the calling worker's runtime. Worker threads only.
std::size_t count() noexcept;
}  // namespace this_worker

}  // namespace tern
