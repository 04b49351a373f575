#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/cpu.h"
#include "core/options.h"
#include "core/progress.h"
#include "core/report.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"

// What every mode does around its load: the file limit, the client runtime, the report's
// common fields, the CPU meters. From the thread that runs the mode unless noted.
namespace tern::bench {

// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the soft limit now in force.
std::size_t raise_file_limit();

// The client's runtime: net.workers workers on the backend net.io names (epoll, uring, auto),
// idle workers polling for net.idle_poll.
RuntimeOptions client_runtime(const NetworkOptions& net);

// The report's mode, target and the network parameters every mode shares (target_address, io,
// workers, duration_s); `backend` is the backend the client really ran on.
void add_network_params(Report& report, const NetworkOptions& net, std::string_view backend);

// The client's CPU (this process), with --server-pid the server's, and how the whole machine
// spent its CPU time, over one interval.
class CpuWindow {
 public:
  explicit CpuWindow(pid_t server_pid) : server_(server_pid) { has_server_ = server_pid > 0; }
  void start();
  // Ends the interval and puts client_cpu_pct (and server_cpu_pct) and machine_cpu into the
  // report.
  void stop(Report& report);

 private:
  std::optional<MachineTicks> machine_start_;
  CpuMeter client_{0};
  CpuMeter server_;
  bool has_server_ = false;
};

// Starts fn(i) for every i in [0, n) as a detached fiber named `name`, fiber i on worker
// i % workers. From a worker fiber; throws std::runtime_error if a worker refuses the work.
template <typename Fn>
void spread_fibers(std::size_t n, std::string_view name, Fn fn) {
  const std::size_t workers = this_worker::count();
  for (std::size_t worker = 0; worker < workers && worker < n; ++worker) {
    Result<void> posted = post(worker, [fn, worker, workers, n, name] {
      for (std::size_t i = worker; i < n; i += workers)
        spawn([fn, i] { fn(i); }, {.name = name}).detach();
    });
    if (!posted) throw std::runtime_error("a worker of the client runtime refused work");
  }
}

// Where a mode's connection fibers and its driver meet: each fiber marks `connected` once its
// connection is up (or has failed), waits for `go`, and marks `finished` at its end (the driver
// does that for it, see run_gated_load). Any fiber of the client runtime.
struct LoadGate {
  WaitGroup connected;
  WaitGroup finished;
  Event go;
};

// Runs body(i) for every i in [0, count) through `gate`, as fibers named `name` spread over the
// workers: once all have connected, calls opened(now) (the measuring window starts there),
// starts `cpu` and `progress` and releases the fibers; once all have finished, stops
// `progress` and puts the CPU figures into `report`. From a worker fiber.
template <typename Body, typename Opened>
void run_gated_load(LoadGate& gate, std::size_t count, std::string_view name, Body body,
                    Opened opened, CpuWindow& cpu, Progress& progress, Report& report) {
  gate.connected.add(count);
  gate.finished.add(count);
  spread_fibers(count, name, [&gate, body](std::size_t i) {
    body(i);
    gate.finished.done();
  });
  (void)gate.connected.wait();
  opened(Clock::now());
  cpu.start();
  progress.start();
  gate.go.set();
  (void)gate.finished.wait();
  progress.stop();
  cpu.stop(report);
}

// Pins the calling thread to one CPU (cpu < 0: leaves it alone); false if the kernel refuses.
bool pin_this_thread(int cpu);
// The index-th CPU this process may run on (-1 if there are fewer).
int usable_cpu(std::size_t index);

// Seconds as a steady_clock duration.
inline std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// Seconds between two time points, as a double.
inline double seconds_between(std::chrono::steady_clock::time_point from,
                              std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace tern::bench
