#include "header16_parse.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <system_error>

#include "chunk_splitter.h"
#include "header16.h"
#include "require.h"
#include "tern/net/buffer.h"

namespace tern::fuzz {

namespace {

using tools::Header16;
using tools::kHeader16Size;

// tern-echo's smallest read buffer (--buf); reads ask for half of it, as frame16_stream does.
constexpr std::size_t kBufferSize = 64;
constexpr std::size_t kReadAtLeast = kBufferSize / 2;

void require(bool condition, const char* what) {
  fuzz::require(condition, "header16 framing", what);
}

std::uint32_t read_u32(const std::byte* at) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = value << 8 | static_cast<std::uint8_t>(at[i]);
  return value;
}

std::uint16_t read_u16(const std::byte* at) {
  return static_cast<std::uint16_t>(static_cast<std::uint8_t>(at[0]) << 8 |
                                    static_cast<std::uint8_t>(at[1]));
}

bool known_message(std::uint16_t ver, std::uint16_t cmd) {
  return ver == tools::kHeader16Version &&
         (cmd == static_cast<std::uint16_t>(tools::Command::echo) ||
          cmd == static_cast<std::uint16_t>(tools::Command::discard));
}

// The same stream decoded at once by byte arithmetic, without Buffer, parse_frame or Header16.
Frame16Summary decode_whole(std::span<const std::byte> stream, std::size_t max_payload) {
  Frame16Summary summary;
  std::size_t at = 0;
  while (stream.size() - at >= kHeader16Size) {
    const std::uint32_t len = read_u32(stream.data() + at);
    if (len > max_payload) {
      summary.close = Frame16Close::oversized;
      return summary;
    }
    if (stream.size() - at - kHeader16Size < len) break;
    const std::uint16_t cmd = read_u16(stream.data() + at + 4);
    if (!known_message(read_u16(stream.data() + at + 6), cmd)) {
      summary.close = Frame16Close::bad_header;
      return summary;
    }
    ++summary.frames;
    if (cmd == static_cast<std::uint16_t>(tools::Command::echo)) ++summary.echoed;
    at += kHeader16Size + len;
  }
  summary.consumed = at;
  summary.leftover = stream.size() - at;
  return summary;
}

// Checks one message found at the start of `rest` and the reply tern-echo would build for it.
void check_message(const net::Frame& frame, std::span<const std::byte> rest,
                   std::size_t max_payload) {
  require(frame.header.data() == rest.data() && frame.header.size() == kHeader16Size,
          "the header is not the first 16 bytes");
  require(frame.body.data() == rest.data() + kHeader16Size,
          "the payload does not follow the header");
  require(frame.size() <= rest.size(), "a message runs past the bytes received");
  require(frame.body.size() == read_u32(rest.data()), "the payload size differs from len");
  require(frame.body.size() <= max_payload, "a payload over the limit accepted");
  const Header16 header = Header16::load(frame.header);
  std::array<std::byte, kHeader16Size> stored;
  header.store(stored);
  require(std::equal(stored.begin(), stored.end(), frame.header.begin()),
          "a header changes when loaded and stored");
  const tern::Result<std::optional<net::Frame>> shorter =
      net::parse_frame(rest.first(frame.size() - 1), tools::header16_format(max_payload));
  require(shorter && !shorter->has_value(), "a message missing its last byte was not incomplete");
  if (header.cmd != static_cast<std::uint16_t>(tools::Command::echo)) return;
  Header16 reply = header;
  reply.ack = header.syn;
  std::array<std::byte, kHeader16Size> reply_bytes;
  reply.store(reply_bytes);
  require(read_u32(reply_bytes.data()) == frame.body.size() &&
              read_u32(reply_bytes.data() + 12) == read_u32(rest.data() + 8) &&
              std::equal(reply_bytes.begin(), reply_bytes.begin() + 12, frame.header.begin()),
          "an echo reply's header is not the request's with ack = syn");
}

}  // namespace

Frame16Summary serve_frame16_bytes(std::span<const std::byte> input) {
  if (input.size() < 2) return {};
  ChunkSplitter reads(static_cast<std::uint8_t>(input[0]));
  const std::size_t max_payload = 4 * static_cast<std::size_t>(input[1]);
  const std::span<const std::byte> stream = input.subspan(2);
  const net::FrameFormat format = tools::header16_format(max_payload);

  Frame16Summary summary;
  net::Buffer in(kBufferSize);
  std::size_t delivered = 0;
  while (summary.close == Frame16Close::none) {
    const std::size_t size = reads.next(stream.size() - delivered);
    if (size == 0) break;  // the peer closed its side
    const std::span<std::byte> free = in.writable(kReadAtLeast);
    require(free.size() >= kReadAtLeast, "no room to read into");
    const std::size_t n = std::min(size, free.size());
    std::memcpy(free.data(), stream.data() + delivered, n);
    in.commit(n);
    delivered += n;

    std::size_t consumed = 0;
    for (;;) {
      const std::span<const std::byte> rest = in.readable().subspan(consumed);
      const tern::Result<std::optional<net::Frame>> frame = net::parse_frame(rest, format);
      if (!frame) {
        require(frame.error() == std::errc::message_size,
                "a framing error other than message_size");
        require(rest.size() >= kHeader16Size && read_u32(rest.data()) > max_payload,
                "a message within the limit rejected");
        summary.close = Frame16Close::oversized;
        break;
      }
      if (!frame->has_value()) {
        require(rest.size() < kHeader16Size || rest.size() < kHeader16Size + read_u32(rest.data()),
                "a complete message left waiting");
        break;
      }
      check_message(**frame, rest, max_payload);
      const Header16 header = Header16::load((*frame)->header);
      if (!known_message(header.ver, header.cmd)) {
        summary.close = Frame16Close::bad_header;
        break;
      }
      ++summary.frames;
      if (header.cmd == static_cast<std::uint16_t>(tools::Command::echo)) ++summary.echoed;
      consumed += (*frame)->size();
    }
    in.consume(consumed);
    summary.consumed += consumed;
    require(in.size() == delivered - summary.consumed, "buffered bytes do not add up");
    if (summary.close == Frame16Close::none) {
      require(in.size() < kHeader16Size + max_payload, "more buffered than the largest message");
    }
  }
  if (summary.close == Frame16Close::none) summary.leftover = in.size();

  const Frame16Summary whole = decode_whole(stream, max_payload);
  require(whole.close == summary.close, "reading in pieces closes for another reason");
  require(whole.frames == summary.frames && whole.echoed == summary.echoed,
          "reading in pieces finds other messages");
  if (summary.close == Frame16Close::none) {
    require(whole.consumed == summary.consumed && whole.leftover == summary.leftover &&
                summary.consumed + summary.leftover == stream.size(),
            "message sizes do not add up to the stream");
  }
  return summary;
}

}  // namespace tern::fuzz
