#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

// Parts of the admin endpoint's /status document that layers the admin endpoint does not see
// (rpc sits beside admin, not under it) contribute: each section is a name and a function that
// returns its value as JSON text.

namespace tern::prof {

// Returns one section's JSON value ("[...]", "{...}"); called from the admin endpoint's fiber.
using StatusSectionFn = std::function<std::string()>;

// Adds a section named `name` (a JSON key of /status); returns an id for remove_status_section.
// Any thread.
std::uint64_t add_status_section(std::string name, StatusSectionFn fn);

// Removes a section; unknown ids are ignored. Waits for no running call of it: `fn` must stay
// callable until the process ends or the section is removed. Any thread.
void remove_status_section(std::uint64_t id);

// Every section's name and value, in the order they were added. Any thread.
std::vector<std::pair<std::string, std::string>> collect_status_sections();

}  // namespace tern::prof
