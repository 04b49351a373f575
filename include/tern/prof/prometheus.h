#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tern/prof/metrics.h"

namespace tern::prof {

// The Content-Type of the Prometheus text exposition format, version 0.0.4.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Renders families in the Prometheus text exposition format 0.0.4: # HELP and # TYPE lines,
// then one line per sample (histograms as cumulative _bucket{le=...}, _sum and _count;
// summaries as _sum and _count). Any thread.
std::string to_prometheus_text(const std::vector<Family>& families);

}  // namespace tern::prof
