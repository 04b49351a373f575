#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace tern::echo {

// A connection's read buffer of `size` bytes (not zeroed), taken from its worker thread's cache
// of the buffers finished connections left there, and given back to it when the connection ends
// (up to kKept per thread; more are freed): a short session (report 004) would otherwise spend
// more instructions in malloc and free of its 16 KiB than in its own reads and writes. The
// connection's fiber (a fiber never leaves its worker's thread).
class ReadBuffer {
 public:
  explicit ReadBuffer(std::size_t size);
  ~ReadBuffer();
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  // The whole buffer.
  std::span<std::byte> span() const noexcept { return {data_.get(), size_}; }

  // Buffers a thread keeps for its next connections.
  static constexpr std::size_t kKept = 64;

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_;
};

}  // namespace tern::echo
