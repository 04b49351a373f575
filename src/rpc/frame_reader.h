#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

#include "frame.h"
#include "tern/base/result.h"
#include "tern/net/buffer.h"
#include "transport.h"

namespace tern::rpc::detail {

// Why a FrameReader stopped yielding frames, besides the ProtocolErrc of a bad header and the
// errors of the stream's reads (std::errc::connection_reset, operation_canceled, timed_out
// between frames), which it passes on as they are.
enum class FrameReadErrc {
  closed = 1,        // the peer closed the connection between frames (a clean end)
  closed_mid_frame,  // the peer closed the connection after part of a frame
  frame_timeout,     // a frame's first bytes came but the rest timed out (the frame timeout, or
                     // the stream's own timeout in the middle of a frame)
};

const std::error_category& frame_read_category() noexcept;
inline std::error_code make_error_code(FrameReadErrc e) noexcept {
  return {static_cast<int>(e), frame_read_category()};
}

// The receiving half of a connection: owns the read buffer, reads from the stream and yields
// whole frames parsed in place. The buffer is reused frame after frame (it compacts before it
// grows), so reading allocates nothing in steady state. Fiber of the connection's worker.
class FrameReader {
 public:
  // Reads from `stream` (which must outlive the reader) frames within `limits`. With a
  // `frame_timeout` above zero, once a frame's first byte has arrived the rest must follow
  // within it (time between frames is not limited by it).
  FrameReader(Transport& stream, const Limits& limits,
              std::chrono::milliseconds frame_timeout = std::chrono::milliseconds(0)) noexcept
      : stream_(stream), limits_(limits), frame_timeout_(frame_timeout) {}

  // The next whole frame, its spans valid until the next call to next() or reset(); waits for
  // the bytes (interruptible: an interrupt fails it with operation_canceled). Fails with a
  // ProtocolErrc for an invalid header (error_detail() says what was wrong), a FrameReadErrc
  // when the peer closed or the frame timeout passed, or the stream's read error.
  tern::Result<RawFrame> next();
  // Drops every buffered byte (for a new connection on the same stream object).
  void reset() noexcept;
  // Consumes the frame last yielded now (its spans become invalid) and, when the read buffer
  // grew past the retained size and what is left fits in it, swaps it for a small one.
  void release() noexcept;
  // Above zero: the read buffer is swapped for a smaller one once a frame that made it grow
  // past this is released (0: the buffer keeps its largest size).
  void set_retained_size(std::size_t bytes) noexcept { retained_size_ = bytes; }
  // Bytes the read buffer has allocated.
  std::size_t held() const noexcept { return capacity_; }
  // Reads from the stream so far: a caller handling frames in a row can tell whether the last
  // next() went to the stream (and may have waited) or found its frame already buffered.
  std::uint64_t reads() const noexcept { return reads_; }

  // Bytes received and not yet yielded as a frame: after an error, how much of the unfinished
  // frame had come.
  std::size_t buffered() const noexcept { return in_.size() - consume_; }
  // What was wrong with the last invalid header, for the log.
  const std::string& error_detail() const noexcept { return detail_; }
  std::chrono::milliseconds frame_timeout() const noexcept { return frame_timeout_; }

 private:
  Transport& stream_;
  const Limits& limits_;
  std::chrono::milliseconds frame_timeout_;
  net::Buffer in_;
  std::size_t consume_ = 0;        // the size of the frame last yielded, consumed at the next call
  std::size_t capacity_ = 0;       // what in_ has allocated (it grows as a net::Buffer does)
  std::size_t retained_size_ = 0;  // see set_retained_size
  std::uint64_t reads_ = 0;
  std::string detail_;
};

}  // namespace tern::rpc::detail

template <>
struct std::is_error_code_enum<tern::rpc::detail::FrameReadErrc> : std::true_type {};
