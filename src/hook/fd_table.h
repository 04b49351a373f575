#pragma once

// What the program believes about each socket tern::hook manages: whether it asked for
// O_NONBLOCK, its SO_RCVTIMEO/SO_SNDTIMEO, and whether the hook made it non-blocking in the
// kernel (which the program must not see). Indexed by descriptor; any thread.

#include <atomic>
#include <cstdint>

#include "tern/io/poll.h"

namespace tern::hook::detail {

enum FdFlag : std::uint32_t {
  kManaged = 1u << 0,         // a socket made through the hooked socket/accept/dup
  kUserNonblock = 1u << 1,    // the program set O_NONBLOCK (SOCK_NONBLOCK, fcntl, FIONBIO)
  kKernelNonblock = 1u << 2,  // O_NONBLOCK is set in the kernel, by the program or the hook
  kReactor = 1u << 3,         // a fiber waited on it through a reactor: close it through one
};

struct FdEntry {
  std::atomic<std::uint32_t> flags{0};
  std::atomic<std::uint32_t> generation{0};      // bumped when the descriptor is closed or replaced
  std::atomic<std::uint32_t> waiters{0};         // fibers parked on it now
  std::atomic<std::int64_t> recv_timeout_ns{0};  // 0: none
  std::atomic<std::int64_t> send_timeout_ns{0};
  std::atomic<bool> emptied{false};  // a fiber's last read left the receive queue empty

  std::uint32_t load() const noexcept { return flags.load(std::memory_order_relaxed); }
  void set(std::uint32_t bits) noexcept { flags.fetch_or(bits, std::memory_order_relaxed); }
  void clear(std::uint32_t bits) noexcept { flags.fetch_and(~bits, std::memory_order_relaxed); }
};

// The table: chunks of entries made on first use and never freed (fd_table.cc), so a look-up is
// two loads and no lock. Inline, since every hooked call starts with one.
inline constexpr int kChunkBits = 10;
inline constexpr int kChunkSize = 1 << kChunkBits;
inline constexpr int kChunks = 1 << 12;  // descriptors up to 4,194,303

struct FdChunk {
  FdEntry entries[kChunkSize];
};

extern std::atomic<FdChunk*> fd_chunks[kChunks];

// The entry of fd if one was ever made, else nullptr. Any thread.
inline FdEntry* find_fd(int fd) noexcept {
  if (fd < 0 || (fd >> kChunkBits) >= kChunks) return nullptr;
  FdChunk* chunk = fd_chunks[fd >> kChunkBits].load(std::memory_order_acquire);
  return chunk != nullptr ? &chunk->entries[fd & (kChunkSize - 1)] : nullptr;
}
// The entry of fd, made on first use; nullptr for a negative or huge descriptor. Any thread.
FdEntry* make_fd(int fd) noexcept;
// Starts managing a socket the program just got: `user_nonblock` is what it asked for,
// `kernel_nonblock` whether O_NONBLOCK is set in the kernel.
void adopt_socket(int fd, bool user_nonblock, bool kernel_nonblock) noexcept;
// Makes `to` (a duplicate of `from`) managed like `from`, if `from` is.
void copy_fd(int from, int to) noexcept;
// Forgets fd (closed or replaced) and bumps its generation, so fibers parked on it see it gone.
// Returns the flags it had.
std::uint32_t forget_fd(int fd) noexcept;

// fd's entry when a hooked call on it should park the calling fiber instead of blocking: a
// managed socket in blocking mode (as the program sees it), called from a fiber of a worker
// with a reactor. Otherwise nullptr, and the call goes straight to libc. Inline, since read and
// recv start with it. Any thread.
inline FdEntry* cooperative_fd(int fd) noexcept {
  FdEntry* entry = find_fd(fd);
  if (entry == nullptr || (entry->load() & (kManaged | kUserNonblock)) != kManaged) return nullptr;
  return io::on_reactor_worker() ? entry : nullptr;
}

}  // namespace tern::hook::detail
