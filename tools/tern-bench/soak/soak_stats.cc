#include "soak/soak_stats.h"

#include <dirent.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <system_error>

#include <fmt/format.h>

#include "core/proc_file.h"

namespace tern::bench {

namespace {

std::error_code last_errno() { return {errno, std::system_category()}; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

// The value of one sample line "name{labels} value [timestamp]"; none if it is not one.
std::optional<double> sample_value(std::string_view line) {
  const std::size_t close = line.rfind('}');
  std::string_view rest = close == std::string_view::npos ? line : line.substr(close + 1);
  if (close == std::string_view::npos) {
    const std::size_t space = rest.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    rest = rest.substr(space);
  }
  rest = trim(rest);
  rest = rest.substr(0, rest.find(' '));  // drop a timestamp
  if (rest.empty()) return std::nullopt;
  // strtod takes NaN and +Inf too; a copy gives it the terminating zero it needs.
  const std::string text(rest);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

Result<std::uint64_t> parse_vm_rss_kib(std::string_view status) {
  std::size_t at = 0;
  while (at < status.size()) {
    std::size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    std::string_view line = status.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with("VmRSS:")) continue;
    line = trim(line.substr(6));
    std::uint64_t kib = 0;
    const auto parsed = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (parsed.ec != std::errc() ||
        trim(std::string_view(parsed.ptr, line.data() + line.size())) != "kB")
      return fail(std::errc::invalid_argument);
    return kib;
  }
  return fail(std::errc::invalid_argument);
}

Result<std::uint64_t> read_rss_kib(pid_t pid) {
  Result<std::string> status =
      read_whole_file(fmt::format("/proc/{}/status", pid), std::errc::no_such_process);
  if (!status) return fail(status.error());
  return parse_vm_rss_kib(*status);
}

Result<std::uint64_t> count_open_fds(pid_t pid) {
  DIR* dir = ::opendir(fmt::format("/proc/{}/fd", pid).c_str());
  if (dir == nullptr) return fail(last_errno());
  std::uint64_t count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count;
}

std::optional<double> least_squares_slope(std::span<const std::pair<double, double>> points) {
  if (points.size() < 2) return std::nullopt;
  double mean_x = 0;
  double mean_y = 0;
  for (const auto& [x, y] : points) {
    mean_x += x;
    mean_y += y;
  }
  mean_x /= static_cast<double>(points.size());
  mean_y /= static_cast<double>(points.size());
  double covariance = 0;
  double variance = 0;
  for (const auto& [x, y] : points) {
    covariance += (x - mean_x) * (y - mean_y);
    variance += (x - mean_x) * (x - mean_x);
  }
  if (variance <= 0) return std::nullopt;
  return covariance / variance;
}

std::optional<double> prometheus_sum(std::string_view page, std::string_view name) {
  std::optional<double> sum;
  std::size_t at = 0;
  while (at < page.size()) {
    std::size_t end = page.find('\n', at);
    if (end == std::string_view::npos) end = page.size();
    const std::string_view line = trim(page.substr(at, end - at));
    at = end + 1;
    if (line.empty() || line.front() == '#' || !line.starts_with(name)) continue;
    const char after = line.size() > name.size() ? line[name.size()] : '\0';
    if (after != '{' && after != ' ' && after != '\t') continue;  // a longer name
    if (const std::optional<double> value = sample_value(line)) sum = sum.value_or(0) + *value;
  }
  return sum;
}

Result<std::string_view> http_ok_body(std::string_view response, std::string* why) {
  const auto bad = [why](std::string reason) -> Result<std::string_view> {
    if (why != nullptr) *why = std::move(reason);
    return fail(std::errc::invalid_argument);
  };
  if (!response.starts_with("HTTP/1.")) return bad("not an HTTP/1.x response");
  const std::size_t line_end = response.find("\r\n");
  const std::string_view status_line = response.substr(0, line_end);
  const std::size_t space = status_line.find(' ');
  if (space == std::string_view::npos || status_line.substr(space + 1, 3) != "200")
    return bad(fmt::format("status '{}'", status_line));
  const std::size_t head_end = response.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return bad("the response head never ends");
  return response.substr(head_end + 4);
}

}  // namespace tern::bench
