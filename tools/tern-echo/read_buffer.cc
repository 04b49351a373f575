#include "read_buffer.h"

#include <vector>

namespace tern::echo {

namespace {

// The buffers of one size (the last one asked for) that this thread's connections gave back.
struct Cache {
  std::size_t size = 0;
  std::vector<std::unique_ptr<std::byte[]>> buffers;
};

thread_local Cache cache;

}  // namespace

ReadBuffer::ReadBuffer(std::size_t size) : size_(size) {
  if (cache.size == size && !cache.buffers.empty()) {
    data_ = std::move(cache.buffers.back());
    cache.buffers.pop_back();
    return;
  }
  data_ = std::make_unique_for_overwrite<std::byte[]>(size);
}

ReadBuffer::~ReadBuffer() {
  if (cache.size != size_) {
    cache.buffers.clear();
    cache.size = size_;
  }
  if (cache.buffers.size() < kKept) cache.buffers.push_back(std::move(data_));
}

}  // namespace tern::echo
