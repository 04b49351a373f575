#pragma once

// The frame layer of tern's RPC protocol (docs/rpc-protocol.md): the 24-byte header, the
// protocol errors and the parser that finds whole frames in received bytes. Any thread.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include "tern/base/result.h"

namespace tern::rpc::detail {

inline constexpr std::uint32_t kMagic = 0x54525043;  // "TRPC"
// Frames of types 1..8 carry version 1 (what every peer reads); the stream frames carry version
// 2, which a version-1 peer refuses as unsupported_version (a goaway that says so) instead of
// waiting for something it cannot parse.
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::uint8_t kStreamVersion = 2;
inline constexpr std::size_t kHeaderSize = 24;

enum class FrameType : std::uint8_t {
  request = 1,
  response = 2,
  one_way = 3,
  push = 4,
  ping = 5,
  pong = 6,
  goaway = 7,
  cancel = 8,
  stream_open = 9,      // client → server: opens a stream to a method
  stream_message = 10,  // either way: one message of a stream, or its end (end_stream)
  stream_status = 11,   // server → client: the stream's final status; ends it
  stream_credit = 12,   // either way: the receiver grants the sender more bytes of its window
  stream_reset = 13,    // either way: the sender abandons the stream, with a status
};

// Whether frames of `type` belong to a stream (and carry kStreamVersion).
inline constexpr bool is_stream_frame(FrameType type) noexcept {
  return static_cast<std::uint8_t>(type) >= static_cast<std::uint8_t>(FrameType::stream_open);
}

// Header flags.
inline constexpr std::uint16_t kFlagCompressed = 1u << 0;  // body is one zstd frame
inline constexpr std::uint16_t kFlagEndStream = 1u << 1;   // stream_message: the sender's last
inline constexpr std::uint16_t kKnownFlags = kFlagCompressed | kFlagEndStream;

struct FrameHeader {
  FrameType type = FrameType::request;
  std::uint16_t flags = 0;
  std::uint64_t call_id = 0;
  std::uint32_t metadata_size = 0;
  std::uint32_t body_size = 0;

  std::size_t frame_size() const noexcept { return kHeaderSize + metadata_size + body_size; }
};

// Writes the header's 24 bytes to `out`.
void encode_header(const FrameHeader& header, std::byte* out) noexcept;

// The protocol violations a peer can commit; each closes its connection.
enum class ProtocolErrc {
  bad_magic = 1,
  unsupported_version,
  unknown_frame_type,
  unknown_flags,
  frame_too_large,
  metadata_too_large,
  bad_metadata,
  bad_compression,
  unexpected_frame,
  unknown_call_id,
};

const std::error_category& protocol_category() noexcept;
inline std::error_code make_error_code(ProtocolErrc e) noexcept {
  return {static_cast<int>(e), protocol_category()};
}

struct Limits {
  std::uint32_t max_frame_size = 64u << 20;
  std::uint32_t max_metadata_size = 64u << 10;
};

// A whole frame in the receive buffer: spans into it, valid until the bytes are consumed.
struct RawFrame {
  FrameHeader header;
  std::span<const std::byte> metadata;
  std::span<const std::byte> body;
  std::size_t size() const noexcept { return header.frame_size(); }
};

// Decodes and checks a header; `detail` gets a description of a violation for the log.
tern::Result<FrameHeader> decode_header(std::span<const std::byte, kHeaderSize> bytes,
                                        const Limits& limits, std::string* detail = nullptr);

// The first frame of `bytes`: a RawFrame when it is all there, std::nullopt when more bytes are
// needed, a ProtocolErrc when the header is invalid (checked as soon as its 24 bytes are in).
tern::Result<std::optional<RawFrame>> next_frame(std::span<const std::byte> bytes,
                                                 const Limits& limits,
                                                 std::string* detail = nullptr);

}  // namespace tern::rpc::detail

template <>
struct std::is_error_code_enum<tern::rpc::detail::ProtocolErrc> : std::true_type {};
