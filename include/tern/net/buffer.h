#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tern/base/clock.h"
#include "tern/base/result.h"

namespace tern::net {

class TcpStream;

// A byte buffer for framed protocols: read into its free space, parse frames in place from its
// readable bytes, then consume them. It compacts (moves the unread bytes to the front) before it
// grows, so a steady stream of frames reuses one allocation. The storage is allocated at the
// first writable() and is not zeroed, so an idle connection's buffers cost no memory and a busy
// one's only the pages it fills. Not thread-safe.
class Buffer {
 public:
  explicit Buffer(std::size_t capacity = 16 * 1024) noexcept : capacity_(capacity) {}

  // The bytes received and not yet consumed.
  std::span<const std::byte> readable() const noexcept {
    return {storage_.get() + begin_, end_ - begin_};
  }
  // The readable bytes as text (a view into the buffer until it is consumed or written to).
  std::string_view text() const noexcept {
    return {reinterpret_cast<const char*>(storage_.get()) + begin_, end_ - begin_};
  }
  std::size_t size() const noexcept { return end_ - begin_; }
  bool empty() const noexcept { return begin_ == end_; }

  // Free space of at least `at_least` bytes after the readable bytes, to fill and commit().
  std::span<std::byte> writable(std::size_t at_least = 1);
  // Marks n bytes of writable() as filled.
  void commit(std::size_t n) noexcept { end_ += n; }
  // Drops the first n readable bytes.
  void consume(std::size_t n) noexcept;
  // Copies bytes in.
  void append(std::span<const std::byte> bytes);
  // Drops everything.
  void clear() noexcept { begin_ = end_ = 0; }

  // Where the readable bytes hold `delim` first, searching from offset `from`: the offset just
  // past the delimiter (the length of the line, delimiter included), or std::nullopt. `delim`
  // must not be empty.
  std::optional<std::size_t> find(std::string_view delim, std::size_t from = 0) const noexcept;
  // Takes the first line ending in `delim` out of the buffer: returns it without the delimiter
  // and consumes it with the delimiter; std::nullopt (the buffer unchanged) when no complete
  // line is there.
  std::optional<std::string> take_line(std::string_view delim = "\n");

  // One read from stream into the free space (at least `at_least` bytes of it); returns the
  // bytes read, 0 at end of stream. Worker fibers only.
  [[nodiscard]] Result<std::size_t> read_from(TcpStream& stream, Deadline deadline = kNoDeadline,
                                              std::size_t at_least = 4096);

 private:
  std::unique_ptr<std::byte[]> storage_;  // capacity_ bytes once allocated
  std::size_t capacity_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

// How a length-prefixed frame is laid out: a fixed header holding the body length as an
// unsigned big-endian integer.
struct FrameFormat {
  std::size_t header_size = 4;      // bytes before the body
  std::size_t length_offset = 0;    // where the length field starts in the header
  std::size_t length_width = 4;     // 1, 2, 4 or 8 bytes
  std::size_t max_body = 64 << 20;  // larger bodies are rejected (std::errc::message_size)
};

// A complete frame seen in place: both spans point into the buffer until it is consumed.
struct Frame {
  std::span<const std::byte> header;
  std::span<const std::byte> body;
  std::size_t size() const noexcept { return header.size() + body.size(); }
};

// Finds the first frame in bytes: a Frame when it is complete, std::nullopt when more bytes are
// needed, std::errc::message_size when the length field exceeds format.max_body. Any thread.
[[nodiscard]] Result<std::optional<Frame>> parse_frame(std::span<const std::byte> bytes,
                                                       const FrameFormat& format);

// Reads a big-endian unsigned integer of `width` bytes. Any thread.
std::uint64_t load_big_endian(const std::byte* at, std::size_t width) noexcept;
// Writes value as a big-endian unsigned integer of `width` bytes. Any thread.
void store_big_endian(std::byte* at, std::size_t width, std::uint64_t value) noexcept;

// Writes header and body with one gather write (retrying until all is written). Worker fibers.
[[nodiscard]] Result<void> write_frame(TcpStream& stream, std::span<const std::byte> header,
                                       std::span<const std::byte> body,
                                       Deadline deadline = kNoDeadline);

}  // namespace tern::net
