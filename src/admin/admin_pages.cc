#include "admin_pages.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <optional>
#include <vector>

#include "admin_http.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/prof/metrics.h"
#include "tern/prof/prometheus.h"
#include "tern/prof/status_sections.h"

namespace tern::admin::detail {

namespace {

constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kJson = "application/json";

constexpr std::string_view kIndex =
    "tern admin endpoint\n"
    "  /metrics  every metric, Prometheus text format 0.0.4\n"
    "  /status   the runtime as JSON\n";

const prof::Family* find(const std::vector<prof::Family>& families, std::string_view name) {
  for (const prof::Family& family : families)
    if (family.name == name) return &family;
  return nullptr;
}

// The sum of a counter's or gauge's series, or nothing when the family is absent (tern::prof
// compiled out, or nothing registered it yet).
std::optional<double> total(const std::vector<prof::Family>& families, std::string_view name) {
  const prof::Family* family = find(families, name);
  if (family == nullptr) return std::nullopt;
  double sum = 0;
  for (const prof::Series& series : family->series) sum += series.value;
  return sum;
}

std::string json_number(std::optional<double> value) {
  if (!value) return "null";
  char text[32];
  if (*value == static_cast<double>(static_cast<long long>(*value))) {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(*value));
  } else {
    std::snprintf(text, sizeof text, "%.6g", *value);
  }
  return text;
}

}  // namespace

AdminPage admin_error_page(int status) {
  AdminPage page;
  page.status = status;
  page.content_type = kText;
  page.body = std::string(reason_phrase(status)) + "\n";
  return page;
}

AdminPage admin_page(std::string_view method, std::string_view path) {
  if (method != "GET" && method != "HEAD") {
    AdminPage page = admin_error_page(405);
    page.extra_headers = "Allow: GET, HEAD\r\n";
    return page;
  }
  AdminPage page;
  if (path == "/metrics") {
    page.content_type = prof::kPrometheusContentType;
    page.body = prof::to_prometheus_text(prof::MetricsRegistry::global().collect());
  } else if (path == "/status") {
    page.content_type = kJson;
    page.body = status_json();
  } else if (path == "/") {
    page.content_type = kText;
    page.body = kIndex;
  } else {
    page = admin_error_page(404);
  }
  return page;
}

std::string status_json() {
  const std::vector<prof::Family> families = prof::MetricsRegistry::global().collect();
  const std::size_t workers = this_worker::count();
  std::vector<double> per_worker(workers, 0);
  double alive = 0;
  if (const prof::Family* fibers = find(families, "tern_fibers_alive")) {
    for (const prof::Series& series : fibers->series) {
      alive += series.value;
      for (const prof::Label& label : series.labels) {
        if (label.name != "worker") continue;
        std::size_t index = 0;
        const char* end = label.value.data() + label.value.size();
        if (std::from_chars(label.value.data(), end, index).ptr == end && index < workers)
          per_worker[index] += series.value;
      }
    }
  }
  char uptime[32];
  std::snprintf(uptime, sizeof uptime, "%.3f", prof::uptime_seconds());
  std::string out = "{";
  out += "\"uptime_seconds\": ";
  out += uptime;
  out += ", \"pid\": " + std::to_string(::getpid());
  out += ", \"workers\": " + std::to_string(workers);
  out += ", \"io_backend\": \"" + std::string(io::to_string(io::current_backend())) + "\"";
  out += ", \"fibers_alive\": " + json_number(alive);
  out += ", \"fibers_alive_per_worker\": [";
  for (std::size_t i = 0; i < workers; ++i) {
    if (i > 0) out += ", ";
    out += json_number(per_worker[i]);
  }
  out +=
      "], \"connections\": {\"open\": " + json_number(total(families, "tern_net_connections_open"));
  out += ", \"accepted\": " + json_number(total(families, "tern_net_connections_accepted_total"));
  out += ", \"closed\": " + json_number(total(families, "tern_net_connections_closed_total"));
  out += ", \"rejected\": " + json_number(total(families, "tern_net_connections_rejected_total"));
  out += "}, \"bytes\": {\"read\": " + json_number(total(families, "tern_io_bytes_read_total"));
  out += ", \"written\": " + json_number(total(families, "tern_io_bytes_written_total"));
  out += "}, \"log\": {\"written\": " + json_number(total(families, "tern_log_written_total"));
  out += ", \"dropped\": " + json_number(total(families, "tern_log_dropped_total"));
  out += "}";
  // Sections of layers above prof that admin does not see (rpc's registered services, ...).
  for (const auto& [name, value] : prof::collect_status_sections()) {
    out += ", \"" + name + "\": " + value;
  }
  out += "}\n";
  return out;
}

}  // namespace tern::admin::detail
