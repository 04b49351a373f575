#include "frame.h"

#include <fmt/format.h>

#include "tern/net/buffer.h"

namespace tern::rpc::detail {

namespace {

class ProtocolCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern.rpc.protocol"; }
  std::string message(int value) const override {
    switch (static_cast<ProtocolErrc>(value)) {
      case ProtocolErrc::bad_magic:
        return "not a tern RPC frame (bad magic)";
      case ProtocolErrc::unsupported_version:
        return "unsupported protocol version";
      case ProtocolErrc::unknown_frame_type:
        return "unknown frame type";
      case ProtocolErrc::unknown_flags:
        return "unknown frame flags";
      case ProtocolErrc::frame_too_large:
        return "frame larger than the limit";
      case ProtocolErrc::metadata_too_large:
        return "metadata larger than the limit";
      case ProtocolErrc::bad_metadata:
        return "metadata is not a valid protobuf message";
      case ProtocolErrc::bad_compression:
        return "compressed body does not decompress";
      case ProtocolErrc::unexpected_frame:
        return "frame type not allowed in this direction";
      case ProtocolErrc::unknown_call_id:
        return "reply for a call id never sent";
    }
    return "unknown protocol error";
  }
};

void describe(std::string* detail, std::string text) {
  if (detail) *detail = std::move(text);
}

}  // namespace

const std::error_category& protocol_category() noexcept {
  static const ProtocolCategory category;
  return category;
}

void encode_header(const FrameHeader& header, std::byte* out) noexcept {
  net::store_big_endian(out, 4, kMagic);
  out[4] = std::byte{is_stream_frame(header.type) ? kStreamVersion : kVersion};
  out[5] = static_cast<std::byte>(header.type);
  net::store_big_endian(out + 6, 2, header.flags);
  net::store_big_endian(out + 8, 8, header.call_id);
  net::store_big_endian(out + 16, 4, header.metadata_size);
  net::store_big_endian(out + 20, 4, header.body_size);
}

tern::Result<FrameHeader> decode_header(std::span<const std::byte, kHeaderSize> bytes,
                                        const Limits& limits, std::string* detail) {
  const std::byte* in = bytes.data();
  const auto magic = static_cast<std::uint32_t>(net::load_big_endian(in, 4));
  if (magic != kMagic) {
    describe(detail, fmt::format("magic {:#010x}, expected {:#010x}", magic, kMagic));
    return fail(make_error_code(ProtocolErrc::bad_magic));
  }
  const auto version = static_cast<std::uint8_t>(in[4]);
  if (version != kVersion && version != kStreamVersion) {
    describe(detail, fmt::format("version {}, this side speaks {} and {}", version, kVersion,
                                 kStreamVersion));
    return fail(make_error_code(ProtocolErrc::unsupported_version));
  }
  // Version 1 knows types 1..8; the stream frames exist from version 2 on.
  const auto type = static_cast<std::uint8_t>(in[5]);
  const auto last =
      static_cast<std::uint8_t>(version == kVersion ? FrameType::cancel : FrameType::stream_reset);
  if (type < static_cast<std::uint8_t>(FrameType::request) || type > last) {
    describe(detail, fmt::format("frame type {} in a version {} frame", type, version));
    return fail(make_error_code(ProtocolErrc::unknown_frame_type));
  }
  FrameHeader header;
  header.type = static_cast<FrameType>(type);
  header.flags = static_cast<std::uint16_t>(net::load_big_endian(in + 6, 2));
  header.call_id = net::load_big_endian(in + 8, 8);
  header.metadata_size = static_cast<std::uint32_t>(net::load_big_endian(in + 16, 4));
  header.body_size = static_cast<std::uint32_t>(net::load_big_endian(in + 20, 4));
  if ((header.flags & ~kKnownFlags) != 0 ||
      ((header.flags & kFlagEndStream) != 0 && header.type != FrameType::stream_message)) {
    describe(detail, fmt::format("flags {:#06x}", header.flags));
    return fail(make_error_code(ProtocolErrc::unknown_flags));
  }
  if (header.metadata_size > limits.max_metadata_size) {
    describe(detail, fmt::format("metadata of {} bytes, limit {}", header.metadata_size,
                                 limits.max_metadata_size));
    return fail(make_error_code(ProtocolErrc::metadata_too_large));
  }
  if (header.frame_size() > limits.max_frame_size) {
    describe(detail, fmt::format("frame of {} bytes, limit {}", header.frame_size(),
                                 limits.max_frame_size));
    return fail(make_error_code(ProtocolErrc::frame_too_large));
  }
  return header;
}

tern::Result<std::optional<RawFrame>> next_frame(std::span<const std::byte> bytes,
                                                 const Limits& limits, std::string* detail) {
  if (bytes.size() < kHeaderSize) return std::optional<RawFrame>{};
  tern::Result<FrameHeader> header = decode_header(
      std::span<const std::byte, kHeaderSize>(bytes.data(), kHeaderSize), limits, detail);
  if (!header) return fail(header.error());
  if (bytes.size() < header->frame_size()) return std::optional<RawFrame>{};
  RawFrame frame;
  frame.header = *header;
  frame.metadata = bytes.subspan(kHeaderSize, header->metadata_size);
  frame.body = bytes.subspan(kHeaderSize + header->metadata_size, header->body_size);
  return std::optional<RawFrame>(frame);
}

}  // namespace tern::rpc::detail
