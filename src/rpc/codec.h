#pragma once

// Building and reading whole frames: metadata as protobuf, bodies optionally zstd-compressed.
// Any thread (no shared state).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "frame.h"
#include "tern/base/result.h"
#include "tern/net/buffer.h"

namespace google::protobuf {
class MessageLite;
}

namespace tern::rpc::wire {
class Metadata;
}

namespace tern::rpc::detail {

// Appends a frame to `out`: the header, `metadata` (nothing when null or empty) and `body`
// (already encoded bytes; compressed with zstd and flagged when `compress`).
void append_frame(net::Buffer& out, FrameType type, std::uint64_t call_id,
                  const wire::Metadata* metadata, std::span<const std::byte> body, bool compress);

// As append_frame, encoding `message` straight into the buffer as the body.
void append_message_frame(net::Buffer& out, FrameType type, std::uint64_t call_id,
                          const wire::Metadata* metadata,
                          const google::protobuf::MessageLite& message, bool compress);

// Appends a frame of a stream with these flags (never compressed).
void append_stream_frame(net::Buffer& out, FrameType type, std::uint64_t stream_id,
                         std::uint16_t flags, const wire::Metadata* metadata,
                         std::span<const std::byte> body);

// Appends a stream_message frame holding `message`, encoded straight into the buffer; returns
// the body's size (what the message costs of the stream's window).
std::size_t append_stream_message(net::Buffer& out, std::uint64_t stream_id,
                                  const google::protobuf::MessageLite& message);

// Parses a frame's metadata block (an empty block leaves `metadata` cleared).
tern::Result<void> parse_metadata(std::span<const std::byte> bytes, wire::Metadata& metadata);

// The body of `frame` as plain bytes: the frame's own bytes, or decompressed into `scratch`.
// A body that decompresses to more than `limit` bytes fails with std::errc::message_size: one
// whose zstd frame declares a larger size before anything is allocated, one without a declared
// size as soon as its output passes the limit. A body that is not one valid zstd frame fails
// with bad_compression.
tern::Result<std::span<const std::byte>> plain_body(const RawFrame& frame, std::size_t limit,
                                                    std::string& scratch);

// Bytes of a std::string, as a span.
inline std::span<const std::byte> as_bytes(std::string_view text) noexcept {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

}  // namespace tern::rpc::detail
