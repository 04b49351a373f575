#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "tern/net/buffer.h"

// The 16-byte message header of the bServer protocol (report 000, docs/benchmark-methods.md),
// big-endian:
//   0 len  u32  payload bytes after the header
//   4 cmd  u16  what to do with the message (see Command)
//   6 ver  u16  protocol version (1)
//   8 syn  u32  the sender's sequence number
//  12 ack  u32  in a reply: the syn it answers
namespace tern::tools {

inline constexpr std::size_t kHeader16Size = 16;
inline constexpr std::uint16_t kHeader16Version = 1;
inline constexpr std::size_t kHeader16AckOffset = 12;

namespace header16_detail {

// Fixed-width big-endian loads and stores, inline: a server parses a header per message, and a
// call to net::load_big_endian's byte loop per field cost it about 3% of its CPU (perf, table
// 000 -A). Any thread.
template <typename T>
T load(const std::byte* at) noexcept {
  T value;
  std::memcpy(&value, at, sizeof value);
  return std::endian::native == std::endian::big ? value : std::byteswap(value);
}
template <typename T>
void store(std::byte* at, T value) noexcept {
  if constexpr (std::endian::native == std::endian::little) value = std::byteswap(value);
  std::memcpy(at, &value, sizeof value);
}

}  // namespace header16_detail

// What the server does with a message.
enum class Command : std::uint16_t {
  echo = 1,     // reply with the same payload
  discard = 2,  // read it, send nothing
};

struct Header16 {
  std::uint32_t len = 0;
  std::uint16_t cmd = 0;
  std::uint16_t ver = kHeader16Version;
  std::uint32_t syn = 0;
  std::uint32_t ack = 0;

  // Writes the header into 16 bytes.
  void store(std::span<std::byte, kHeader16Size> out) const noexcept {
    header16_detail::store(out.data(), len);
    header16_detail::store(out.data() + 4, cmd);
    header16_detail::store(out.data() + 6, ver);
    header16_detail::store(out.data() + 8, syn);
    header16_detail::store(out.data() + kHeader16AckOffset, ack);
  }
  // Reads a header from 16 bytes.
  static Header16 load(std::span<const std::byte> in) noexcept {
    Header16 h;
    h.len = header16_detail::load<std::uint32_t>(in.data());
    h.cmd = header16_detail::load<std::uint16_t>(in.data() + 4);
    h.ver = header16_detail::load<std::uint16_t>(in.data() + 6);
    h.syn = header16_detail::load<std::uint32_t>(in.data() + 8);
    h.ack = header16_detail::load<std::uint32_t>(in.data() + kHeader16AckOffset);
    return h;
  }
};

// Sets the ack field of the header at the start of `header` (16 bytes or more) in place.
inline void store_header16_ack(std::span<std::byte> header, std::uint32_t ack) noexcept {
  header16_detail::store(header.data() + kHeader16AckOffset, ack);
}

// The frame layout of this protocol for net::parse_frame.
inline net::FrameFormat header16_format(std::size_t max_payload) {
  return net::FrameFormat{
      .header_size = kHeader16Size, .length_offset = 0, .length_width = 4, .max_body = max_payload};
}

}  // namespace tern::tools
