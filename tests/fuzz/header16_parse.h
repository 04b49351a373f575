#pragma once

// The 16-byte-header framing of tern-bench's traffic (tools/common/header16.h over
// tern::net::parse_frame in a net::Buffer) and tern-echo's frame16 mode (tools::Frame16Echo, a
// streaming echo), run over bytes in memory in socket-sized reads: what the libFuzzer target
// header16_fuzz feeds and what its seed corpus check runs. Any thread.

#include <cstddef>
#include <span>

namespace tern::fuzz {

// Why the connection was closed (none: the stream ended, waiting for more bytes).
enum class Frame16Close { none, oversized, bad_header };

// What serve_frame16_bytes found in its stream.
struct Frame16Summary {
  std::size_t frames = 0;    // messages read (answered or discarded)
  std::size_t echoed = 0;    // of those, echo requests
  std::size_t consumed = 0;  // bytes of those messages
  std::size_t leftover = 0;  // bytes of an incomplete message at the end of the stream
  Frame16Close close = Frame16Close::none;
};

// Input layout: byte 0 sets the read sizes (0: the whole stream in one read, n: reads of 1 to n
// bytes), byte 1 the payload limit (4 bytes per unit), the rest is the stream. Reads it into a
// net::Buffer of tern-echo's smallest size and parses messages in a loop, checking each message
// and reply and the buffer's progress, then compares the result with a plain decoder run over the
// whole stream. Then runs tools::Frame16Echo over the same reads, as tern-echo's frame16_stream
// does, and checks the bytes it sends back and why it closes against the whole stream's. Aborts
// when a check fails.
Frame16Summary serve_frame16_bytes(std::span<const std::byte> input);

}  // namespace tern::fuzz
