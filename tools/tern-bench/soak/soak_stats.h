#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "tern/base/result.h"

// What `tern-bench soak` reads about the server and how it sums it up: /proc readings, the
// least-squares trend of a series, the few values it takes from a Prometheus /metrics page.
// Pure functions and /proc reads; any thread.
namespace tern::bench {

// The resident set of a process in KiB (VmRSS of /proc/PID/status).
Result<std::uint64_t> read_rss_kib(pid_t pid);

// VmRSS in KiB from the text of a /proc/PID/status file; invalid_argument if it has none.
Result<std::uint64_t> parse_vm_rss_kib(std::string_view status);

// The descriptors a process has open (the entries of /proc/PID/fd).
Result<std::uint64_t> count_open_fds(pid_t pid);

// The least-squares slope of y over x (units of y per unit of x) of the points (x, y); none
// for fewer than two points or when every x is the same.
std::optional<double> least_squares_slope(std::span<const std::pair<double, double>> points);

// The sum of every sample of metric `name` (any labels) in a Prometheus text page; none if the
// page has no such sample. "name" must match the sample's name exactly ("a_total", not "a").
std::optional<double> prometheus_sum(std::string_view page, std::string_view name);

// The body of an HTTP/1.x response whose status is 200; invalid_argument (with `why`) if the
// response is not one.
Result<std::string_view> http_ok_body(std::string_view response, std::string* why = nullptr);

}  // namespace tern::bench
