#pragma once

#include <cstddef>

#include "tern/base/result.h"
#include "tern/fiber/event.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"

namespace tern::rpc::detail {

// The sending half of a connection: fibers append whole frames to buffer() and call wake(); one
// writer fiber runs run() and sends everything appended since its last write in one write, so
// replies finished in the same scheduling round share a system call. Fibers of one worker.
class alignas(64) FrameWriter {
 public:
  explicit FrameWriter(net::TcpStream& stream) : stream_(stream) {}

  // Where to append frames; call wake() afterwards.
  net::Buffer& buffer() noexcept { return pending_; }
  void wake() noexcept {
    if (idle_) wakeup_.set();
  }
  // Like wake(), but when `alone` (no other frame of this connection is expected this round, so
  // there is nothing to batch with) and the writer is idle, sends from the calling fiber and
  // leaves the writer only what the socket did not take.
  void flush(bool alone) noexcept;
  // Bytes appended and not yet written.
  std::size_t pending() const noexcept { return pending_.size() + in_write_; }

  // The writer fiber's loop: returns when stop() was called and everything was written, or at
  // the first write error (the rest is dropped).
  tern::Result<void> run();
  // Lets run() return once the buffer is empty.
  void stop() noexcept {
    stopping_ = true;
    wakeup_.set();
  }
  bool failed() const noexcept { return failed_; }

 private:
  // What every call reads (the stream, the buffer it appends to, the flags) comes first, on one
  // cache line: with thousands of connections a connection's writer is rarely in cache.
  net::TcpStream& stream_;
  net::Buffer pending_;
  bool idle_ = false;
  bool stopping_ = false;
  bool failed_ = false;
  std::size_t in_write_ = 0;
  net::Buffer writing_;
  Event wakeup_;
};

}  // namespace tern::rpc::detail
