#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tern/log/detail/record.h"

namespace tern::log::detail {

// One logging thread's buffer: a single-producer single-consumer byte ring of records. The
// thread reserves and commits records (RingProducer, inlined at call sites); the writer thread
// reads up to `published` and gives space back by advancing `head`. A record never wraps: a
// filler record pads the end when the next one does not fit there. The ring outlives its
// thread: the writer frees it once the thread has exited (`retired`) and it is empty.
struct Ring : RingProducer {
  Ring(std::size_t capacity, pid_t tid);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  std::size_t capacity() const noexcept { return mask + 1; }

  alignas(64) std::atomic<std::uint64_t> head{0};  // writer: bytes before it are consumed
  std::atomic<bool> retired{false};                // the owning thread exited or moved on
  Ring* next = nullptr;                            // the logger's list (writer unlinks)
  std::uint64_t last_ns = 0;                       // writer: keeps this thread's times monotonic
  char thread_text[24] = {};                       // "t<tid>", the context of plain threads
  std::size_t thread_text_size = 0;
};

}  // namespace tern::log::detail
