#include "tern/net/buffer.h"

#include <sys/uio.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

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

std::optional<std::size_t> Buffer::find(std::string_view delim, std::size_t from) const noexcept {
  TERN_ASSERT(!delim.empty(), "tern::net::Buffer::find: the delimiter is empty");
  const std::string_view bytes = text();
  if (from >= bytes.size()) return std::nullopt;
  const std::size_t at = bytes.find(delim, from);
  if (at == std::string_view::npos) return std::nullopt;
  return at + delim.size();
}

std::optional<std::string> Buffer::take_line(std::string_view delim) {
  const std::optional<std::size_t> end = find(delim);
  if (!end) return std::nullopt;
  std::string line(text().substr(0, *end - delim.size()));
  consume(*end);
  return line;
}

Result<std::size_t> TcpStream::read_until(Buffer& buffer, std::string_view delim,
                                          std::size_t max_bytes, Deadline deadline) {
  TERN_ASSERT(!delim.empty(), "tern::net::TcpStream::read_until: the delimiter is empty");
  // Bytes already searched: a delimiter that ends in new bytes starts at most delim.size() - 1
  // bytes before them, so each byte is searched about once however the line arrives.
  std::size_t searched = 0;
  for (;;) {
    if (const std::optional<std::size_t> end = buffer.find(delim, searched)) {
      if (*end <= max_bytes) return *end;
      break;
    }
    if (buffer.size() >= max_bytes) break;
    searched = buffer.size() - std::min(buffer.size(), delim.size() - 1);
    Result<std::size_t> n = buffer.read_from(*this, deadline);
    if (!n) return fail(n.error());
    if (*n == 0) return fail(Errc::eof);
  }
  return fail(with_context(std::make_error_code(std::errc::message_size),
                           fmt::format("read_until: no delimiter within {} bytes", max_bytes)));
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
