#pragma once

#include <sys/uio.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/buffer.h"

// Code written once for any fiber-blocking byte stream: net::TcpStream and tls::TlsStream both
// model ByteStream, so echo and framing code runs over either without a copy.

namespace tern::tls {

// A fiber-blocking, connected byte stream with TcpStream's calls.
template <typename S>
concept ByteStream = requires(S& stream, std::span<std::byte> in, std::span<const std::byte> out,
                              std::span<iovec> iov, Deadline deadline) {
  { stream.read(in, deadline) } -> std::same_as<Result<std::size_t>>;
  { stream.read_exact(in, deadline) } -> std::same_as<Result<void>>;
  { stream.write_all(out, deadline) } -> std::same_as<Result<void>>;
  { stream.writev_all(iov, deadline) } -> std::same_as<Result<void>>;
};

// Sends back every byte read until the peer ends its side (then returns the bytes echoed), an
// error, or an idle read past `idle` (0: no limit). Worker fibers only.
template <ByteStream S>
[[nodiscard]] Result<std::uint64_t> echo(
    S& stream, std::span<std::byte> buffer,
    std::chrono::nanoseconds idle = std::chrono::nanoseconds(0)) {
  std::uint64_t total = 0;
  for (;;) {
    const Deadline deadline = idle.count() > 0 ? deadline_after(idle) : kNoDeadline;
    Result<std::size_t> n = stream.read(buffer, deadline);
    if (!n) return fail(n.error());
    if (*n == 0) return total;
    if (Result<void> sent = stream.write_all(buffer.first(*n), deadline); !sent)
      return fail(sent.error());
    total += *n;
  }
}

// Writes a frame's header and body with one gather write. Worker fibers only.
template <ByteStream S>
[[nodiscard]] Result<void> write_frame(S& stream, std::span<const std::byte> header,
                                       std::span<const std::byte> body,
                                       Deadline deadline = kNoDeadline) {
  iovec iov[2] = {{const_cast<std::byte*>(header.data()), header.size()},
                  {const_cast<std::byte*>(body.data()), body.size()}};
  return stream.writev_all(iov, deadline);
}

// Reads until `buffer` holds a whole frame of `format` and returns it (in place: consume its
// size() once done with it); std::nullopt when the stream ends cleanly between frames,
// Errc::eof inside one, std::errc::message_size for a body over format.max_body. Worker
// fibers only.
template <ByteStream S>
[[nodiscard]] Result<std::optional<net::Frame>> read_frame(S& stream, net::Buffer& buffer,
                                                           const net::FrameFormat& format,
                                                           Deadline deadline = kNoDeadline) {
  for (;;) {
    Result<std::optional<net::Frame>> frame = net::parse_frame(buffer.readable(), format);
    if (!frame || *frame) return frame;
    std::span<std::byte> space = buffer.writable(4096);
    Result<std::size_t> n = stream.read(space, deadline);
    if (!n) return fail(n.error());
    if (*n == 0) {
      if (buffer.empty()) return std::optional<net::Frame>();
      return fail(Errc::eof);
    }
    buffer.commit(*n);
  }
}

}  // namespace tern::tls
