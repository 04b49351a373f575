#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/progress.h"

namespace tern::bench {

// One reading of the monitor: the client's totals and the server's RSS and descriptors.
struct SoakSample {
  double t_s = 0;  // seconds since the monitor started
  std::string phase;
  std::uint64_t ops = 0;
  std::uint64_t errors = 0;
  std::optional<std::uint64_t> rss_kib;  // with a server pid
  std::optional<std::uint64_t> fds;
};

// The trend of the server's RSS and descriptors over the samples of the steady load.
struct SoakTrend {
  std::size_t samples = 0;              // the samples fitted
  std::optional<double> rss_kib_per_s;  // least-squares slope
  std::optional<double> fds_per_s;
};

// Samples the server (RSS, open descriptors) and the client's meter once a second from a
// thread of its own, keeps every sample and prints a progress line per sample on stderr
// (unless quiet). start(), stop() and the readers after stop() from one thread; set_phase()
// and the load marks from any thread.
class SoakMonitor {
 public:
  // `server_pid` 0: the server is not sampled (the lines say "n/a").
  SoakMonitor(const Meter& meter, pid_t server_pid, std::string ops_unit, bool quiet);
  ~SoakMonitor();
  SoakMonitor(const SoakMonitor&) = delete;
  SoakMonitor& operator=(const SoakMonitor&) = delete;

  // Starts the clock and takes the first sample at once.
  void start();
  // Takes a last sample and stops; idempotent.
  void stop();
  // Names what the run is doing now (shown on each line and kept with each sample).
  void set_phase(std::string phase);
  // Marks the start and the end of the steady load (the window the trend is fitted over,
  // after its warm-up).
  void mark_load_start();
  void mark_load_end();
  // Seconds since start().
  double elapsed_s() const;

  // After stop(): every sample, and the trend over the samples taken between the load's start
  // plus `warmup_s` and its end.
  const std::vector<SoakSample>& samples() const { return samples_; }
  SoakTrend trend(double warmup_s) const;
  std::optional<double> load_start_s() const { return load_start_s_; }
  std::optional<double> load_end_s() const { return load_end_s_; }

 private:
  void loop();
  void take_sample(bool print);

  using Clock = std::chrono::steady_clock;
  const Meter& meter_;
  pid_t server_pid_;
  std::string ops_unit_;
  bool quiet_;
  Clock::time_point start_{};
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::string phase_ = "start";
  std::optional<double> load_start_s_;
  std::optional<double> load_end_s_;
  std::vector<SoakSample> samples_;
  std::uint64_t last_ops_ = 0;
  double last_t_s_ = 0;
  std::thread thread_;
};

}  // namespace tern::bench
