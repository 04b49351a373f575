#pragma once

#include <string>

namespace tern::net::detail {

// Writes "tern: <message>" to stderr, at most once per second per call site kind (the rest are
// counted and the count is reported with the next line). Any thread.
void log_rate_limited(const std::string& message);

}  // namespace tern::net::detail
