#include "handlers.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../common/frame16_echo.h"
#include "../common/header16.h"
#include "read_buffer.h"
#include "tern/log/peer_log.h"
#include "tern/net/buffer.h"

namespace tern::echo {

namespace {

// The peer's address for a log line.
std::string peer_of(const net::TcpStream& stream) {
  Result<net::Address> peer = stream.peer_address();
  return peer ? peer->to_string() : std::string("an unknown peer");
}

}  // namespace

// How to write the answer to a read of n bytes into a buffer of `size`: held back (and sent with
// the next answer) when the read filled the buffer and the kernel said more bytes are queued,
// since the next read then returns at once and its answer follows this one.
net::Flush answer_flush(const net::TcpStream& stream, std::size_t n, std::size_t size) {
  return n == size && stream.more_queued() ? net::Flush::later : net::Flush::now;
}

void echo_stream(net::TcpStream& stream, std::size_t buf_size) {
  // Not zeroed, and reused: a short-lived connection (report 004) would spend more on a memset,
  // or on malloc and free, than on I/O.
  const ReadBuffer storage(buf_size);
  const std::span buf = storage.span();
  for (;;) {
    Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
    if (!stream.write_all(buf.first(*n), kNoDeadline, answer_flush(stream, *n, buf.size()))) return;
  }
}

void echo_stream_lean(net::TcpStream& stream, std::size_t buf_size) {
  std::unique_ptr<std::byte[]> storage;
  for (;;) {
    if (!storage) {
      if (!stream.wait_readable()) return;
      storage = std::make_unique_for_overwrite<std::byte[]>(buf_size);
    }
    const std::span buf(storage.get(), buf_size);
    Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
    if (!stream.write_all(buf.first(*n))) return;
    if (*n < buf_size) storage.reset();  // a short read: the socket is (most likely) empty
  }
}

void discard_stream(net::TcpStream& stream, std::size_t buf_size) {
  const ReadBuffer storage(buf_size);
  const std::span buf = storage.span();
  for (;;) {
    Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
  }
}

// Streams (tools::Frame16Echo): each read fills the buffer but for an incomplete header kept at
// its front, and one writev sends back every byte of echo messages it brought (held back while
// more requests are queued, see answer_flush; a read that brings nothing to answer sends what is
// held once nothing more is queued).
void frame16_stream(net::TcpStream& stream, std::size_t buf_size, std::size_t max_payload) {
  const ReadBuffer storage(buf_size);
  const std::span<std::byte> buf = storage.span();
  tools::Frame16Echo echo(max_payload);
  std::vector<iovec> replies;
  std::size_t kept = 0;
  bool held = false;  // the last answer was held back (net::Flush::later)
  for (;;) {
    Result<std::size_t> n = stream.read(buf.subspan(kept));
    if (!n || *n == 0) return;
    replies.clear();
    const std::size_t filled = kept + *n;
    const tools::Frame16Echo::Step step = echo.take(buf.first(filled), replies);
    const net::Flush flush = answer_flush(stream, *n, buf.size() - kept);
    if (!replies.empty()) {
      if (!stream.writev_all(replies, kNoDeadline, flush)) return;
      held = flush == net::Flush::later;
    } else if (held && flush == net::Flush::now) {
      if (!stream.flush()) return;
      held = false;
    }
    const tools::Header16& header = echo.header();
    if (step.verdict == tools::Frame16Echo::Verdict::oversized) {
      TERN_PEER_LOG_WARN("frame16: closing the connection from {}: payload of {} bytes over {}",
                         peer_of(stream), header.len, max_payload);
      return;
    }
    if (step.verdict == tools::Frame16Echo::Verdict::bad_header) {
      TERN_PEER_LOG_WARN("frame16: closing the connection from {}: bad header (ver {}, cmd {})",
                         peer_of(stream), header.ver, header.cmd);
      return;
    }
    kept = step.kept;
    // Mostly none (reads end on message boundaries): no call then.
    if (kept > 0) std::memmove(buf.data(), buf.data() + filled - kept, kept);
  }
}

void ttcp_stream(net::TcpStream& stream, std::size_t buf_size, std::size_t max_payload) {
  // The payload only needs counting: it streams through one buffer of --buf bytes, so what a
  // connection holds does not depend on the length a peer announces.
  const ReadBuffer storage(buf_size);
  const std::span<std::byte> buf = storage.span();
  std::array<std::byte, 4> length;
  while (stream.read_exact(length)) {
    const std::uint64_t size = net::load_big_endian(length.data(), 4);
    if (size > max_payload) {
      TERN_PEER_LOG_WARN("ttcp: closing the connection from {}: payload of {} bytes over {}",
                         peer_of(stream), size, max_payload);
      return;
    }
    for (std::uint64_t left = size; left > 0;) {
      Result<std::size_t> n = stream.read(buf.first(std::min<std::uint64_t>(left, buf.size())));
      if (!n || *n == 0) return;
      left -= *n;
    }
    if (!stream.write_all(length)) return;
  }
}

void serve_connection(net::TcpStream& stream, const EchoConfig& config) {
  // An idle connection costs no read buffer: take one only once the first bytes (or the peer's
  // close) are there. Under --idle-timeout the wait times out like a read.
  if (!stream.wait_readable()) return;
  // TCP_NODELAY came with the connection from the listener (ServerOptions::listen.nodelay).
  switch (config.mode) {
    case EchoMode::echo:
      if (config.stack_mode == StackMode::shared) return echo_stream_lean(stream, config.buf);
      return echo_stream(stream, config.buf);
    case EchoMode::discard:
      return discard_stream(stream, config.buf);
    case EchoMode::frame16:
      return frame16_stream(stream, config.buf, config.max_payload);
    case EchoMode::ttcp:
      return ttcp_stream(stream, config.buf, config.max_payload);
  }
}

}  // namespace tern::echo
