#include "tern/net/buffer.h"

#include <sys/uio.h>

#include "tern/base/assert.h"
#include "tern/net/tcp_stream.h"

namespace tern::net {

std::span<std::byte> Buffer::writable(std::size_t at_least) {
  if (storage_ == nullptr || capacity_ - end_ < at_least) {
    if (begin_ > 0) {  // compact first: move the unread bytes to the front
      std::memmove(storage_.get(), storage_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    std::size_t capacity = capacity_ > 0 ? capacity_ : 4096;
    while (capacity - end_ < at_least) capacity *= 2;
    if (storage_ == nullptr || capacity != capacity_) {
      // Uninitialised on purpose: only the bytes a read or append fills are ever touched.
      std::unique_ptr<std::byte[]> grown = std::make_unique_for_overwrite<std::byte[]>(capacity);
      if (end_ > 0) std::memcpy(grown.get(), storage_.get(), end_);
      storage_ = std::move(grown);
      capacity_ = capacity;
    }
  }
  return {storage_.get() + end_, capacity_ - end_};
}

void Buffer::consume(std::size_t n) noexcept {
  begin_ += n < size() ? n : size();
  if (begin_ == end_) begin_ = end_ = 0;
}

void Buffer::append(std::span<const std::byte> bytes) {
  std::span<std::byte> free = writable(bytes.size());
  std::memcpy(free.data(), bytes.data(), bytes.size());
  commit(bytes.size());
}

Result<std::size_t> Buffer::read_from(TcpStream& stream, Deadline deadline, std::size_t at_least) {
  Result<std::size_t> n = stream.read(writable(at_least), deadline);
  if (n) commit(*n);
  return n;
}

std::uint64_t load_big_endian(const std::byte* at, std::size_t width) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value = (value << 8) | static_cast<std::uint8_t>(at[i]);
  return value;
}

void store_big_endian(std::byte* at, std::size_t width, std::uint64_t value) noexcept {
  for (std::size_t i = width; i-- > 0;) {
    at[i] = static_cast<std::byte>(value & 0xff);
    value >>= 8;
  }
}

Result<std::optional<Frame>> parse_frame(std::span<const std::byte> bytes,
                                         const FrameFormat& format) {
  TERN_ASSERT(format.length_width >= 1 && format.length_width <= 8 &&
                  format.length_offset + format.length_width <= format.header_size,
              "tern::net::parse_frame: the length field must be 1 to 8 bytes within the header");
  if (bytes.size() < format.header_size) return std::optional<Frame>();
  const std::uint64_t body =
      load_big_endian(bytes.data() + format.length_offset, format.length_width);
  if (body > format.max_body) return fail(std::errc::message_size);
  if (bytes.size() - format.header_size < body) return std::optional<Frame>();
  return std::optional<Frame>(
      Frame{bytes.first(format.header_size), bytes.subspan(format.header_size, body)});
}

Result<void> write_frame(TcpStream& stream, std::span<const std::byte> header,
                         std::span<const std::byte> body, Deadline deadline) {
  iovec iov[2] = {{const_cast<std::byte*>(header.data()), header.size()},
                  {const_cast<std::byte*>(body.data()), body.size()}};
  return stream.writev_all(iov, deadline);
}

}  // namespace tern::net
