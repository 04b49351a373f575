#pragma once

// The --idle-poll option of tern's tools (tern-echo, tern-rpc-server, tern-bench): how long an
// idle worker polls for work before it sleeps (RuntimeOptions::idle_poll).

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "tern/fiber/runtime.h"

namespace tern::tools {

// The help text of --idle-poll.
inline constexpr const char* kIdlePollOptionHelp =
    "how long an idle worker polls for work before it sleeps, as in 200us or 1ms (0: sleep at "
    "once; not given: the TERN_IDLE_POLL environment variable, else 0). Costs CPU while idle; "
    "a worker stops polling while other runnable threads want every CPU";

// Parses --idle-poll's text into `idle_poll` (empty text: not given). Returns why the text is
// wrong, or an empty string. Main thread, before the runtime starts.
inline std::string check_idle_poll_option(const std::string& text,
                                          std::optional<std::chrono::microseconds>& idle_poll) {
  if (text.empty()) return {};
  Result<std::chrono::microseconds> parsed = parse_idle_poll(text);
  if (!parsed)
    return "--idle-poll " + text +
           ": expected a duration of at most 1s such as 200us or 1ms (or 0)";
  idle_poll = *parsed;
  return {};
}

// Like check_idle_poll_option, but prints why the text is wrong, naming `tool`, and returns
// false. Main thread, before the runtime starts.
inline bool parse_idle_poll_option(const char* tool, const std::string& text,
                                   std::optional<std::chrono::microseconds>& idle_poll) {
  const std::string why = check_idle_poll_option(text, idle_poll);
  if (why.empty()) return true;
  std::fprintf(stderr, "%s: %s\n", tool, why.c_str());
  return false;
}

}  // namespace tern::tools
