// The descriptor table's chunks, and the calls that make, copy and forget entries.
#include "fd_table.h"

#include <cstddef>
#include <new>

namespace tern::hook::detail {

constinit std::atomic<FdChunk*> fd_chunks[kChunks] = {};

FdEntry* make_fd(int fd) noexcept {
  if (fd < 0 || (fd >> kChunkBits) >= kChunks) return nullptr;
  std::atomic<FdChunk*>& slot = fd_chunks[fd >> kChunkBits];
  FdChunk* chunk = slot.load(std::memory_order_acquire);
  if (chunk == nullptr) {
    auto* made = new (std::nothrow) FdChunk;
    if (made == nullptr) return nullptr;
    if (slot.compare_exchange_strong(chunk, made, std::memory_order_acq_rel)) {
      chunk = made;
    } else {
      delete made;  // another thread made it first; `chunk` holds theirs
    }
  }
  return &chunk->entries[fd & (kChunkSize - 1)];
}

void adopt_socket(int fd, bool user_nonblock, bool kernel_nonblock) noexcept {
  FdEntry* entry = make_fd(fd);
  if (entry == nullptr) return;
  entry->recv_timeout_ns.store(0, std::memory_order_relaxed);
  entry->send_timeout_ns.store(0, std::memory_order_relaxed);
  entry->emptied.store(false, std::memory_order_relaxed);
  entry->flags.store(
      kManaged | (user_nonblock ? kUserNonblock : 0u) | (kernel_nonblock ? kKernelNonblock : 0u),
      std::memory_order_release);
}

void copy_fd(int from, int to) noexcept {
  const FdEntry* source = find_fd(from);
  if (source == nullptr || (source->load() & kManaged) == 0) return;
  FdEntry* copy = make_fd(to);
  if (copy == nullptr) return;
  copy->recv_timeout_ns.store(source->recv_timeout_ns.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
  copy->send_timeout_ns.store(source->send_timeout_ns.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
  copy->flags.store(source->load() & ~kReactor, std::memory_order_release);
}

std::uint32_t forget_fd(int fd) noexcept {
  FdEntry* entry = find_fd(fd);
  if (entry == nullptr) return 0;
  entry->generation.fetch_add(1, std::memory_order_acq_rel);
  return entry->flags.exchange(0, std::memory_order_acq_rel);
}

}  // namespace tern::hook::detail
