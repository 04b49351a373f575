#include "header16_parse.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <system_error>
#include <vector>

#include "chunk_splitter.h"
#include "frame16_echo.h"
#include "header16.h"
#include "require.h"
#include "tern/net/buffer.h"

namespace tern::fuzz {

namespace {

using tools::Header16;
using tools::kHeader16Size;

// tern-echo's smallest read buffer (--buf). The Buffer loop asks each read for half of it.
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

// What is wrong with the header at `header`, by byte arithmetic: a payload over the limit
// (checked first, as parse_frame does), an unknown version or command, or nothing.
Frame16Close header_fault(const std::byte* header, std::size_t max_payload) {
  if (read_u32(header) > max_payload) return Frame16Close::oversized;
  if (!known_message(read_u16(header + 6), read_u16(header + 4))) return Frame16Close::bad_header;
  return Frame16Close::none;
}

bool is_echo(const std::byte* header) {
  return read_u16(header + 4) == static_cast<std::uint16_t>(tools::Command::echo);
}

// The same stream decoded at once by byte arithmetic, without Buffer, parse_frame or Header16.
// Like the Buffer loop, it judges a header's command only once its whole message is there.
Frame16Summary decode_whole(std::span<const std::byte> stream, std::size_t max_payload) {
  Frame16Summary summary;
  std::size_t at = 0;
  while (stream.size() - at >= kHeader16Size) {
    const std::byte* header = stream.data() + at;
    const std::uint32_t len = read_u32(header);
    const Frame16Close fault = header_fault(header, max_payload);
    if (fault == Frame16Close::oversized) {
      summary.close = fault;
      return summary;
    }
    if (stream.size() - at - kHeader16Size < len) break;
    if (fault == Frame16Close::bad_header) {
      summary.close = fault;
      return summary;
    }
    ++summary.frames;
    if (is_echo(header)) ++summary.echoed;
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

// What tern-echo's streaming echo must send for `stream` read at once: every echo message's
// header with ack = syn and as much of its payload as arrived, up to the first invalid header,
// which it judges as soon as the header is whole.
struct StreamedReplies {
  std::vector<std::byte> bytes;
  Frame16Close close = Frame16Close::none;
};

StreamedReplies expected_replies(std::span<const std::byte> stream, std::size_t max_payload) {
  StreamedReplies out;
  std::size_t at = 0;
  while (stream.size() - at >= kHeader16Size) {
    const std::byte* header = stream.data() + at;
    out.close = header_fault(header, max_payload);
    if (out.close != Frame16Close::none) break;
    const std::size_t body =
        std::min<std::size_t>(read_u32(header), stream.size() - at - kHeader16Size);
    if (is_echo(header)) {
      out.bytes.insert(out.bytes.end(), header, header + 12);
      out.bytes.insert(out.bytes.end(), header + 8, header + 12);  // ack = syn
      out.bytes.insert(out.bytes.end(), header + kHeader16Size, header + kHeader16Size + body);
    }
    at += kHeader16Size + body;
  }
  return out;
}

Frame16Close close_of(tools::Frame16Echo::Verdict verdict) {
  switch (verdict) {
    case tools::Frame16Echo::Verdict::oversized:
      return Frame16Close::oversized;
    case tools::Frame16Echo::Verdict::bad_header:
      return Frame16Close::bad_header;
    case tools::Frame16Echo::Verdict::more:
      break;
  }
  return Frame16Close::none;
}

// Runs tools::Frame16Echo over `stream` in the reads `reads` gives, in a buffer of tern-echo's
// smallest size with the kept bytes moved to its front, as frame16_stream does, and checks that
// the bytes it sends back and why it closes are those of the whole stream. Returns that reason.
Frame16Close check_streaming_echo(std::span<const std::byte> stream, ChunkSplitter reads,
                                  std::size_t max_payload) {
  tools::Frame16Echo echo(max_payload);
  std::array<std::byte, kBufferSize> buffer{};
  std::vector<iovec> replies;
  std::vector<std::byte> sent;
  std::size_t kept = 0;
  std::size_t delivered = 0;
  tools::Frame16Echo::Verdict verdict = tools::Frame16Echo::Verdict::more;
  for (;;) {
    require(kept < kHeader16Size, "more than an incomplete header kept");
    const std::size_t size = std::min(reads.next(stream.size() - delivered), kBufferSize - kept);
    if (size == 0) break;
    std::memcpy(buffer.data() + kept, stream.data() + delivered, size);
    delivered += size;
    const std::size_t filled = kept + size;
    replies.clear();
    const tools::Frame16Echo::Step step = echo.take(std::span(buffer).first(filled), replies);
    for (const iovec& reply : replies) {
      const auto* from = static_cast<const std::byte*>(reply.iov_base);
      require(from >= buffer.data() && from + reply.iov_len <= buffer.data() + filled,
              "a reply range outside the bytes read");
      sent.insert(sent.end(), from, from + reply.iov_len);
    }
    verdict = step.verdict;
    if (verdict != tools::Frame16Echo::Verdict::more) break;
    require(step.kept <= filled, "kept more than was read");
    kept = step.kept;
    std::memmove(buffer.data(), buffer.data() + filled - kept, kept);
  }
  const StreamedReplies whole = expected_replies(stream.first(delivered), max_payload);
  require(close_of(verdict) == whole.close, "the streaming echo closes for another reason");
  require(sent == whole.bytes,
          "the streaming echo sends other bytes than the whole stream's replies");
  return whole.close;
}

}  // namespace

Frame16Summary serve_frame16_bytes(std::span<const std::byte> input) {
  if (input.size() < 2) return {};
  const ChunkSplitter splitter(static_cast<std::uint8_t>(input[0]));
  ChunkSplitter reads = splitter;
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

  // tern-echo's streaming echo over the same reads: it sees every header the loop above saw, so a
  // reason the loop closed for is the echo's too, and an echo that found no fault means a loop
  // that found none.
  const Frame16Close echo_close = check_streaming_echo(stream, splitter, max_payload);
  if (summary.close != Frame16Close::none)
    require(echo_close == summary.close, "the echo closes for another reason than the loop");
  if (echo_close == Frame16Close::none)
    require(summary.close == Frame16Close::none, "the loop closed where the echo found no fault");
  return summary;
}

}  // namespace tern::fuzz
