#pragma once

// The frame parsing loop of a tern RPC connection, run over bytes in memory: what the libFuzzer
// target rpc_frame_fuzz feeds and what the seed corpus check runs. Any thread.

#include <cstddef>
#include <span>
#include <system_error>

namespace tern::fuzz {

// What parse_frame_stream found in its bytes.
struct FrameStreamSummary {
  std::size_t frames = 0;    // whole, valid frames
  std::size_t consumed = 0;  // bytes of those frames
  std::error_code error;     // the protocol error that stopped the parse (none: more bytes needed)
};

// Parses `bytes` frame by frame as a connection does (with small limits): header, metadata and
// decompressed body of each, until a protocol error or an incomplete frame. Re-encodes every valid
// frame and parses it again; aborts when the codec disagrees with itself.
FrameStreamSummary parse_frame_stream(std::span<const std::byte> bytes);

}  // namespace tern::fuzz
