#pragma once

// Splits a byte stream into the reads a socket might deliver, for the fuzz targets that parse a
// stream as it arrives. Not thread-safe (one per stream).

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tern::fuzz {

// Read sizes drawn from a small deterministic generator: each from 1 to max_chunk bytes, or the
// whole rest of the stream at once when max_chunk is 0.
class ChunkSplitter {
 public:
  explicit ChunkSplitter(std::uint8_t max_chunk) noexcept
      : max_chunk_(max_chunk), state_(0x9e3779b9u ^ max_chunk) {}

  // The size of the next read while `remaining` bytes are still to come (0 when none are).
  std::size_t next(std::size_t remaining) noexcept {
    if (max_chunk_ == 0) return remaining;
    state_ = state_ * 1664525u + 1013904223u;
    return std::min<std::size_t>(remaining, 1 + (state_ >> 16) % max_chunk_);
  }

 private:
  std::uint32_t max_chunk_;
  std::uint32_t state_;
};

}  // namespace tern::fuzz
