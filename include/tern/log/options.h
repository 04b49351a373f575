#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tern/log/level.h"
#include "tern/log/sink.h"

namespace tern::log {

// What a logging thread does when its buffer is full because the writer fell behind.
enum class Policy : std::uint8_t {
  block,  // wait for room: no record is ever lost
  drop,   // drop the record and count it (dropped(); the writer logs "N messages dropped")
};

// How init() sets the logger up. Fill with designated initializers.
struct Options {
  std::vector<std::shared_ptr<Sink>> sinks{};  // where lines go (with `file`); none: stderr
  FileSinkOptions file{};                      // file.path set: a FileSink is added to `sinks`
  Level level = Level::info;                   // the run-time level (set_level changes it)
  Policy policy = Policy::block;
  std::size_t buffer_bytes = 1 << 20;  // per logging thread; a power of two, at least 16 KiB
  bool synchronous = false;            // no writer thread: the caller writes the line itself
};

}  // namespace tern::log
