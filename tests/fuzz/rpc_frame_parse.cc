#include "rpc_frame_parse.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "metadata.pb.h"
#include "require.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "tern/net/buffer.h"

namespace tern::fuzz {

namespace {

namespace detail = rpc::detail;

// Small enough for the fuzzer to reach both limits.
constexpr detail::Limits kLimits{.max_frame_size = 64u << 10, .max_metadata_size = 4u << 10};
constexpr detail::Limits kNoLimits{.max_frame_size = std::numeric_limits<std::uint32_t>::max(),
                                   .max_metadata_size = std::numeric_limits<std::uint32_t>::max()};

void require(bool condition, const char* what) {
  fuzz::require(condition, "rpc frame parser", what);
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// A whole frame found at the start of `rest` must be consistent with its header and with the
// parser's answer for its bytes minus the last one.
void check_frame(const detail::RawFrame& frame, std::span<const std::byte> rest) {
  const detail::FrameHeader& header = frame.header;
  require(frame.size() == detail::kHeaderSize + header.metadata_size + header.body_size,
          "frame size differs from its header");
  require(frame.size() <= rest.size(), "frame runs past the bytes");
  require(frame.size() <= kLimits.max_frame_size, "frame over the limit accepted");
  require(header.metadata_size <= kLimits.max_metadata_size, "metadata over the limit accepted");
  require(frame.metadata.data() == rest.data() + detail::kHeaderSize &&
              frame.metadata.size() == header.metadata_size,
          "metadata span is not where the header puts it");
  require(frame.body.data() == frame.metadata.data() + frame.metadata.size() &&
              frame.body.size() == header.body_size,
          "body span is not where the header puts it");
  require((header.flags & ~detail::kKnownFlags) == 0, "unknown flags accepted");
  tern::Result<std::optional<detail::RawFrame>> shorter =
      detail::next_frame(rest.first(frame.size() - 1), kLimits);
  require(shorter && !shorter->has_value(), "a frame missing its last byte was not incomplete");
}

// Encodes the frame again from its parsed parts and parses the result: the same type, call id,
// compression flag, metadata and body must come back.
void check_round_trip(const detail::RawFrame& frame, const rpc::wire::Metadata& metadata,
                      std::span<const std::byte> body) {
  const bool compressed = (frame.header.flags & detail::kFlagCompressed) != 0;
  net::Buffer out;
  detail::append_frame(out, frame.header.type, frame.header.call_id, &metadata, body, compressed);
  tern::Result<std::optional<detail::RawFrame>> again =
      detail::next_frame(out.readable(), kNoLimits);
  require(again && again->has_value(), "a re-encoded frame does not parse");
  const detail::RawFrame& copy = **again;
  require(copy.size() == out.size(), "a re-encoded frame is not the whole encoding");
  require(copy.header.type == frame.header.type, "frame type changed in a round trip");
  require(copy.header.call_id == frame.header.call_id, "call id changed in a round trip");
  require(copy.header.flags == (compressed ? detail::kFlagCompressed : 0),
          "flags changed in a round trip");
  rpc::wire::Metadata reparsed;
  require(detail::parse_metadata(copy.metadata, reparsed).has_value(),
          "re-encoded metadata does not parse");
  require(reparsed.SerializeAsString() == metadata.SerializeAsString(),
          "metadata changed in a round trip");
  std::string scratch;
  tern::Result<std::span<const std::byte>> plain = detail::plain_body(copy, body.size(), scratch);
  require(plain && same_bytes(*plain, body), "body changed in a round trip");
}

}  // namespace

FrameStreamSummary parse_frame_stream(std::span<const std::byte> bytes) {
  FrameStreamSummary summary;
  rpc::wire::Metadata metadata;
  std::string scratch;
  std::span<const std::byte> rest = bytes;
  for (;;) {
    std::string why;
    tern::Result<std::optional<detail::RawFrame>> found = detail::next_frame(rest, kLimits, &why);
    if (!found) {
      require(found.error().category() == detail::protocol_category(),
              "the parser failed with an error that is not a protocol error");
      require(!why.empty(), "a protocol error without a description");
      summary.error = found.error();
      break;
    }
    if (!found->has_value()) break;
    const detail::RawFrame& frame = **found;
    check_frame(frame, rest);
    if (tern::Result<void> parsed = detail::parse_metadata(frame.metadata, metadata); !parsed) {
      summary.error = parsed.error();
      break;
    }
    tern::Result<std::span<const std::byte>> body =
        detail::plain_body(frame, kLimits.max_frame_size, scratch);
    if (!body) {
      summary.error = body.error();
      break;
    }
    require(body->size() <= kLimits.max_frame_size, "a body decompressed past the limit");
    check_round_trip(frame, metadata, *body);
    ++summary.frames;
    summary.consumed += frame.size();
    rest = rest.subspan(frame.size());
  }
  return summary;
}

}  // namespace tern::fuzz
