// The abusive clients of the rpc soak (soak_abuse.h). They build frames by hand from
// docs/rpc-protocol.md (tern-bench sees only tern's public headers): the 24-byte header, the
// metadata as the two protobuf string fields service and method, and for the bomb a zstd frame
// of RLE blocks that declares its decompressed size, as any zstd encoder would write it.
#include "soak/soak_abuse.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "rpc_message.h"
#include "tern/fiber/fiber.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"

namespace tern::bench {

namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kMagic = 0x54525043;  // "TRPC"
constexpr std::size_t kHeaderSize = 24;
constexpr std::uint8_t kRequest = 1;
constexpr std::uint8_t kResponse = 2;
constexpr std::uint8_t kPing = 5;
constexpr std::uint8_t kCancel = 8;
constexpr std::uint16_t kCompressed = 1;

// What a bomb's body declares (and decompresses to).
constexpr std::uint32_t kBombBytes = 64u << 20;
// Frames per write of the flooding clients.
constexpr std::size_t kBatch = 100;
// Calls per connection of the reset clients (half of them cancelled before the reset).
constexpr std::size_t kPipelined = 20;
// How long a flooding client's write waits for room before it tries again (it keeps the
// connection either way).
constexpr auto kFloodWriteWait = 100ms;

void append_frame(std::string& out, std::uint8_t type, std::uint16_t flags, std::uint64_t call_id,
                  std::string_view metadata, std::string_view body) {
  std::array<std::byte, kHeaderSize> header{};
  net::store_big_endian(header.data(), 4, kMagic);
  header[4] = std::byte{1};
  header[5] = std::byte{type};
  net::store_big_endian(header.data() + 6, 2, flags);
  net::store_big_endian(header.data() + 8, 8, call_id);
  net::store_big_endian(header.data() + 16, 4, metadata.size());
  net::store_big_endian(header.data() + 20, 4, body.size());
  out.append(reinterpret_cast<const char*>(header.data()), header.size());
  out.append(metadata);
  out.append(body);
}

void append_string_field(std::string& out, int field, std::string_view text) {
  out += static_cast<char>((field << 3) | 2);
  out += static_cast<char>(text.size());  // the names here are shorter than 128 bytes
  out.append(text);
}

std::string say_metadata() {
  std::string metadata;
  append_string_field(metadata, 1, "tern.bench.BenchmarkService");
  append_string_field(metadata, 2, "Say");
  return metadata;
}

void append_little_endian(std::string& out, std::uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// One zstd frame of `size` zero bytes: a single-segment header with a 4-byte content size, then
// RLE blocks of 128 KiB, 4 bytes each.
std::string zstd_zeros(std::uint32_t size) {
  constexpr std::uint32_t kBlock = 128u << 10;
  std::string frame;
  append_little_endian(frame, 0xFD2FB528, 4);
  frame += static_cast<char>(0xA0);  // content size in 4 bytes, single segment
  append_little_endian(frame, size, 4);
  for (std::uint32_t left = size; left > 0;) {
    const std::uint32_t block = std::min(left, kBlock);
    left -= block;
    const std::uint32_t last = left == 0 ? 1 : 0;
    append_little_endian(frame, (block << 3) | (1u << 1) | last, 3);  // an RLE block
    frame += '\0';
  }
  return frame;
}

std::string say_body() {
  BenchmarkMessage request;
  fill_rpc_request(request);
  std::string body;
  request.SerializeToString(&body);
  return body;
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

Deadline earlier(Deadline a, Deadline b) { return std::min(a, b); }

// The type and call id of the next frame from the server, its metadata and body skipped; none
// when the connection ended or the deadline passed.
struct FrameSeen {
  std::uint8_t type = 0;
  std::uint64_t call_id = 0;
};
std::optional<FrameSeen> next_frame(net::TcpStream& stream, Deadline deadline) {
  std::array<std::byte, kHeaderSize> header{};
  if (!stream.read_exact(header, deadline)) return std::nullopt;
  FrameSeen seen;
  seen.type = static_cast<std::uint8_t>(header[5]);
  std::uint64_t call_id = 0;
  for (int i = 8; i < 16; ++i) call_id = (call_id << 8) | static_cast<std::uint8_t>(header[i]);
  seen.call_id = call_id;
  std::size_t rest = 0;
  for (int field = 16; field < 24; field += 4) {
    std::uint32_t size = 0;
    for (int i = field; i < field + 4; ++i)
      size = (size << 8) | static_cast<std::uint8_t>(header[i]);
    rest += size;
  }
  if (rest > (1u << 20)) return std::nullopt;  // no answer to these clients is that large
  std::vector<std::byte> skipped(rest);
  if (rest > 0 && !stream.read_exact(skipped, deadline)) return std::nullopt;
  return seen;
}

}  // namespace

void Abusers::start(Event& go, const Deadline& end) {
  for (std::uint32_t i = 0; i < per_kind_; ++i) {
    running_.add(4);
    spawn([this, &go, &end] { bomb(go, end); }, {.name = "soak-abuse-bomb"}).detach();
    spawn([this, &go, &end] { flood(go, end, false); }, {.name = "soak-abuse-ping"}).detach();
    spawn([this, &go, &end] { flood(go, end, true); }, {.name = "soak-abuse-unread"}).detach();
    spawn([this, &go, &end] { reset(go, end); }, {.name = "soak-abuse-reset"}).detach();
  }
}

void Abusers::wait() { (void)running_.wait(); }

bool Abusers::pause() {
  if (interval_.count() <= 0) {
    this_fiber::yield();
    return true;
  }
  return this_fiber::sleep_for(interval_).has_value();
}

void Abusers::report(Json& figures) const {
  figures["abuse_clients"] = 4 * per_kind_;
  figures["abuse_bombs"] = counts_.bombs;
  figures["abuse_bomb_answers"] = counts_.bomb_answers;
  figures["abuse_pings"] = counts_.pings;
  figures["abuse_unread_calls"] = counts_.unread_calls;
  figures["abuse_resets"] = counts_.resets;
  figures["abuse_server_closes"] = counts_.server_closes;
  figures["abuse_connects"] = counts_.connects;
  figures["abuse_connect_failures"] = counts_.connect_failures;
}

void Abusers::bomb(Event& go, const Deadline& end) {
  if (go.wait()) {
    const std::string metadata = say_metadata();
    const std::string zeros = zstd_zeros(kBombBytes);
    while (Clock::now() < end) {
      Result<net::TcpStream> stream =
          net::TcpStream::connect(server_, earlier(end, deadline_after(2s)));
      if (!stream) {
        ++counts_.connect_failures;
        if (!this_fiber::sleep_for(10ms)) break;
        continue;
      }
      ++counts_.connects;
      bool open = true;
      for (std::uint64_t id = 1; open && Clock::now() < end; ++id) {
        std::string frame;
        append_frame(frame, kRequest, kCompressed, id, metadata, zeros);
        if (!stream->write_all(bytes_of(frame), end)) break;
        ++counts_.bombs;
        for (;;) {
          std::optional<FrameSeen> seen = next_frame(*stream, end);
          if (!seen) {
            open = false;
            break;
          }
          if (seen->type == kResponse && seen->call_id == id) {
            ++counts_.bomb_answers;
            if (!pause()) open = false;
            break;
          }
          // A goaway, or a late answer: read on until this call's answer or the close.
        }
      }
      if (Clock::now() < end) ++counts_.server_closes;
    }
  }
  running_.done();
}

void Abusers::flood(Event& go, const Deadline& end, bool calls) {
  if (go.wait()) {
    const std::string metadata = say_metadata();
    const std::string body = say_body();
    std::string batch;
    for (std::size_t i = 0; i < kBatch; ++i) {
      if (calls) {
        append_frame(batch, kRequest, 0, i + 1, metadata, body);
      } else {
        append_frame(batch, kPing, 0, i + 1, {}, {});
      }
    }
    const std::size_t frame_size = batch.size() / kBatch;
    std::uint64_t& counted = calls ? counts_.unread_calls : counts_.pings;
    while (Clock::now() < end) {
      Result<net::TcpStream> stream =
          net::TcpStream::connect(server_, earlier(end, deadline_after(2s)));
      if (!stream) {
        ++counts_.connect_failures;
        if (!this_fiber::sleep_for(10ms)) break;
        continue;
      }
      ++counts_.connects;
      // Writes the batch again and again from where the last write stopped, so frames stay whole
      // however the server takes the bytes; never reads.
      std::size_t at = 0;
      std::size_t written = 0;
      while (Clock::now() < end) {
        Result<std::size_t> wrote = stream->write(bytes_of(std::string_view(batch).substr(at)),
                                                  earlier(end, deadline_after(kFloodWriteWait)));
        if (!wrote) {
          if (wrote.error() == std::errc::timed_out) continue;  // the server stopped reading
          ++counts_.server_closes;
          break;
        }
        written += *wrote;
        at = (at + *wrote) % batch.size();
        counted += written / frame_size;
        written %= frame_size;
        if (!pause()) break;
      }
    }
  }
  running_.done();
}

void Abusers::reset(Event& go, const Deadline& end) {
  if (go.wait()) {
    const std::string metadata = say_metadata();
    const std::string body = say_body();
    std::string pipeline;
    for (std::uint64_t id = 1; id <= kPipelined; ++id)
      append_frame(pipeline, kRequest, 0, id, metadata, body);
    for (std::uint64_t id = 1; id <= kPipelined; id += 2)
      append_frame(pipeline, kCancel, 0, id, {}, {});
    while (Clock::now() < end) {
      Result<net::TcpStream> stream =
          net::TcpStream::connect(server_, earlier(end, deadline_after(2s)));
      if (!stream) {
        ++counts_.connect_failures;
      } else {
        ++counts_.connects;
        if (!stream->write_all(bytes_of(pipeline), earlier(end, deadline_after(1s)))) {
          ++counts_.server_closes;
        }
        const linger abort_on_close{.l_onoff = 1, .l_linger = 0};
        (void)::setsockopt(stream->fd(), SOL_SOCKET, SO_LINGER, &abort_on_close,
                           sizeof abort_on_close);
        stream->close();
        ++counts_.resets;
      }
      if (!pause()) break;
    }
  }
  running_.done();
}

}  // namespace tern::bench
