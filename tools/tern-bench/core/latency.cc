#include "core/latency.h"

#include <fmt/format.h>

namespace tern::bench {

namespace {

double microseconds(double nanoseconds) { return round_to(nanoseconds / 1000.0, 3); }

}  // namespace

prof::Histogram LatencyRecorder::merged() const {
  prof::Histogram all;
  for (const prof::Histogram& h : slots_) all.merge(h);
  return all;
}

void add_latency_figures(Json& figures, const prof::Histogram& ns, std::string_view prefix) {
  const std::string p(prefix);
  const auto put = [&](const char* name, double value) {
    figures[p + name] = ns.count() == 0 ? Json(nullptr) : Json(microseconds(value));
  };
  put("mean_us", ns.mean());
  put("p50_us", static_cast<double>(ns.percentile(50)));
  put("p90_us", static_cast<double>(ns.percentile(90)));
  put("p99_us", static_cast<double>(ns.percentile(99)));
  put("p999_us", static_cast<double>(ns.percentile(99.9)));
  put("min_us", static_cast<double>(ns.min()));
  put("max_us", static_cast<double>(ns.max()));
}

std::string latency_line(std::string_view what, const prof::Histogram& ns) {
  if (ns.count() == 0) return fmt::format("{} (us): no samples", what);
  return fmt::format(
      "{} (us, {} samples): mean {:.3f}, p50 {:.3f}, p90 {:.3f}, p99 {:.3f}, p99.9 {:.3f}, "
      "max {:.3f}",
      what, ns.count(), ns.mean() / 1000.0, static_cast<double>(ns.percentile(50)) / 1000.0,
      static_cast<double>(ns.percentile(90)) / 1000.0,
      static_cast<double>(ns.percentile(99)) / 1000.0,
      static_cast<double>(ns.percentile(99.9)) / 1000.0, static_cast<double>(ns.max()) / 1000.0);
}

}  // namespace tern::bench
