#include "core/run_support.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include "tern/io/backend.h"

namespace tern::bench {

std::size_t raise_file_limit() {
  rlimit limit = {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<std::size_t>(limit.rlim_cur);
}

RuntimeOptions client_runtime(const NetworkOptions& net) {
  const Result<io::BackendChoice> choice = io::parse_backend(net.io);
  return RuntimeOptions{
      .workers = net.workers,
      .make_parker = io::reactors(choice ? *choice : io::BackendChoice::automatic),
      .idle_poll = net.idle_poll};
}

void add_network_params(Report& report, const NetworkOptions& net, std::string_view backend) {
  report.target = net.name;
  report.params["target_address"] = net.target.to_string();
  report.params["io"] = std::string(backend);
  report.params["workers"] = net.workers;
  report.params["duration_s"] = net.duration_s;
  report.params["idle_poll_us"] =
      net.idle_poll ? Json(static_cast<std::int64_t>(net.idle_poll->count())) : Json(nullptr);
  report.params["server_pid"] = net.server_pid > 0 ? Json(net.server_pid) : Json(nullptr);
}

void CpuWindow::start() {
  Result<MachineTicks> machine = read_machine_ticks();
  machine_start_ = machine ? std::optional<MachineTicks>(*machine) : std::nullopt;
  client_.start();
  if (has_server_) server_.start();
}

void CpuWindow::stop(Report& report) {
  report.client_cpu_pct = client_.stop();
  if (Result<MachineTicks> machine = read_machine_ticks(); machine && machine_start_)
    report.machine_cpu = machine_split(*machine_start_, *machine);
  if (has_server_) {
    report.server_cpu_pct = server_.stop();
    if (!report.server_cpu_pct) report.notes.push_back("the server's CPU could not be read");
  }
}

bool pin_this_thread(int cpu) {
  if (cpu < 0) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set) == 0;
}

int usable_cpu(std::size_t index) {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  std::size_t seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    if (seen++ == index) return cpu;
  }
  return -1;
}

}  // namespace tern::bench
