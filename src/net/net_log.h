#pragma once

#include <string>

namespace tern::net::detail {

// Logs the message at WARN through tern::log, at most once per second (the rest are counted and
// the count is reported with the next line). Any thread.
void log_rate_limited(const std::string& message);

}  // namespace tern::net::detail
