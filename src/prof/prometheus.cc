// The Prometheus text exposition format, version 0.0.4.
#include "tern/prof/prometheus.h"

#include <charconv>
#include <cmath>

namespace tern::prof {

namespace {

std::string_view type_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::counter:
      return "counter";
    case MetricKind::gauge:
      return "gauge";
    case MetricKind::histogram:
      return "histogram";
    case MetricKind::summary:
      return "summary";
  }
  return "untyped";
}

// HELP text escapes backslash and newline; label values also escape the double quote.
void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_value(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char text[32];
    const std::to_chars_result end = std::to_chars(text, text + sizeof text, value);
    out.append(text, end.ptr);
  }
}

// name{a="x",b="y",le="0.5"} value
void append_sample(std::string& out, std::string_view name, std::string_view suffix,
                   const Labels& labels, const Label* extra, double value) {
  out += name;
  out += suffix;
  if (!labels.empty() || extra != nullptr) {
    out += '{';
    bool first = true;
    auto add = [&](const Label& label) {
      if (!first) out += ',';
      first = false;
      out += label.name;
      out += "=\"";
      append_escaped(out, label.value, true);
      out += '"';
    };
    for (const Label& label : labels) add(label);
    if (extra != nullptr) add(*extra);
    out += '}';
  }
  out += ' ';
  append_value(out, value);
  out += '\n';
}

std::string bound_text(double bound) {
  std::string text;
  append_value(text, bound);
  return text;
}

}  // namespace

std::string to_prometheus_text(const std::vector<Family>& families) {
  std::string out;
  for (const Family& family : families) {
    out += "# HELP ";
    out += family.name;
    out += ' ';
    append_escaped(out, family.help, false);
    out += "\n# TYPE ";
    out += family.name;
    out += ' ';
    out += type_name(family.kind);
    out += '\n';
    for (const Series& series : family.series) {
      switch (family.kind) {
        case MetricKind::counter:
        case MetricKind::gauge:
          append_sample(out, family.name, "", series.labels, nullptr, series.value);
          break;
        case MetricKind::histogram:
          for (const auto& [bound, count] : series.buckets) {
            const Label le{"le", bound_text(bound)};
            append_sample(out, family.name, "_bucket", series.labels, &le,
                          static_cast<double>(count));
          }
          append_sample(out, family.name, "_sum", series.labels, nullptr, series.sum);
          append_sample(out, family.name, "_count", series.labels, nullptr,
                        static_cast<double>(series.count));
          break;
        case MetricKind::summary:
          append_sample(out, family.name, "_sum", series.labels, nullptr, series.sum);
          append_sample(out, family.name, "_count", series.labels, nullptr,
                        static_cast<double>(series.count));
          break;
      }
    }
  }
  return out;
}

}  // namespace tern::prof
