#pragma once

#include <cstddef>
#include <cstdint>
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
    net::store_big_endian(out.data(), 4, len);
    net::store_big_endian(out.data() + 4, 2, cmd);
    net::store_big_endian(out.data() + 6, 2, ver);
    net::store_big_endian(out.data() + 8, 4, syn);
    net::store_big_endian(out.data() + kHeader16AckOffset, 4, ack);
  }
  // Reads a header from 16 bytes.
  static Header16 load(std::span<const std::byte> in) noexcept {
    Header16 h;
    h.len = static_cast<std::uint32_t>(net::load_big_endian(in.data(), 4));
    h.cmd = static_cast<std::uint16_t>(net::load_big_endian(in.data() + 4, 2));
    h.ver = static_cast<std::uint16_t>(net::load_big_endian(in.data() + 6, 2));
    h.syn = static_cast<std::uint32_t>(net::load_big_endian(in.data() + 8, 4));
    h.ack = static_cast<std::uint32_t>(net::load_big_endian(in.data() + kHeader16AckOffset, 4));
    return h;
  }
};

// Sets the ack field of the header at the start of `header` (16 bytes or more) in place.
inline void store_header16_ack(std::span<std::byte> header, std::uint32_t ack) noexcept {
  net::store_big_endian(header.data() + kHeader16AckOffset, 4, ack);
}

// The frame layout of this protocol for net::parse_frame.
inline net::FrameFormat header16_format(std::size_t max_payload) {
  return net::FrameFormat{
      .header_size = kHeader16Size, .length_offset = 0, .length_width = 4, .max_body = max_payload};
}

}  // namespace tern::tools
