#pragma once

// Logs TRACE, DEBUG, INFO and WARN from a file built with TERN_LOG_MIN_LEVEL=INFO; returns how
// many of the calls evaluated their argument.
int log_around_min_level();
