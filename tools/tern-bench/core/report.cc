#include "core/report.h"

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace tern::bench {

namespace {

Json optional_number(const std::optional<double>& value) {
  return value ? Json(round_to(*value, 1)) : Json(nullptr);
}

std::string scalar_text(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// "key value, key value, ..." wrapped at about 100 columns, each line indented.
std::string wrapped_pairs(const Json& object, std::string_view indent) {
  std::string out;
  std::string line(indent);
  bool first = true;
  for (const auto& [key, value] : object.items()) {
    const std::string item = fmt::format("{} {}", key, scalar_text(value));
    if (!first && line.size() + item.size() + 2 > 100) {
      out += line + ",\n";
      line = std::string(indent.size(), ' ');
      first = true;
    }
    line += (first ? "" : ", ") + item;
    first = false;
  }
  return out + line + "\n";
}

}  // namespace

double round_to(double value, int decimals) {
  if (!std::isfinite(value)) return 0;
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

void Report::add_error(std::string message) {
  ++errors;
  if (error_messages.size() < kMaxErrorMessages) error_messages.push_back(std::move(message));
}

Json Report::to_json() const {
  Json out = Json::object();
  out["tool"] = "tern-bench";
  out["mode"] = mode;
  out["target"] = target;
  out["params"] = params;
  out["figures"] = figures;
  out["errors"] = errors;
  out["verified"] = verified;
  out["client_cpu_pct"] = optional_number(client_cpu_pct);
  out["server_cpu_pct"] = optional_number(server_cpu_pct);
  if (machine_cpu) {
    out["machine_cpu"] = {{"cpus", machine_cpu->cpus},
                          {"user_pct", round_to(machine_cpu->user_pct, 1)},
                          {"system_pct", round_to(machine_cpu->system_pct, 1)},
                          {"irq_pct", round_to(machine_cpu->irq_pct, 1)},
                          {"idle_pct", round_to(machine_cpu->idle_pct, 1)},
                          {"steal_pct", round_to(machine_cpu->steal_pct, 1)}};
  } else {
    out["machine_cpu"] = nullptr;
  }
  out["error_messages"] = error_messages;
  out["notes"] = notes;
  return out;
}

std::string Report::json_line() const { return to_json().dump(); }

std::string Report::text() const {
  std::string out = fmt::format("tern-bench {}: {}\n", mode, target);
  out += wrapped_pairs(params, "  params: ");
  for (const std::string& line : summary) out += "  " + line + "\n";
  out += wrapped_pairs(figures, "  figures: ");
  const auto cpu = [](const std::optional<double>& pct) {
    return pct ? fmt::format("{:.1f}%", *pct) : std::string("n/a");
  };
  out += fmt::format("  CPU (% of one CPU): client {}, server {}\n", cpu(client_cpu_pct),
                     cpu(server_cpu_pct));
  if (machine_cpu) {
    out += fmt::format(
        "  machine CPU (% of {} CPUs): user {:.1f}, system {:.1f}, irq {:.1f}, idle {:.1f}, "
        "steal {:.1f}\n",
        machine_cpu->cpus, machine_cpu->user_pct, machine_cpu->system_pct, machine_cpu->irq_pct,
        machine_cpu->idle_pct, machine_cpu->steal_pct);
  }
  for (const std::string& note : notes) out += "  note: " + note + "\n";
  if (exit_status() == 0) {
    out += "  verified: yes, 0 errors\n";
  } else {
    out += fmt::format("  FAILED: verified {}, {} error(s)\n", verified ? "yes" : "no", errors);
    for (const std::string& message : error_messages) out += "    " + message + "\n";
  }
  return out;
}

int print_report(const Report& report, bool json) {
  const std::string text = json ? report.json_line() + "\n" : report.text();
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return report.exit_status();
}

}  // namespace tern::bench
