// The fiber layer's part of a log line and of a fatal message: which worker and which fiber.
#include "log_context.h"

#include <cstdint>
#include <cstring>

#include "fiber_control.h"
#include "scheduler.h"
#include "tern/base/assert.h"
#include "tern/log/log.h"

namespace tern::detail {

namespace {

std::size_t append_text(char* out, std::size_t at, std::size_t capacity, const char* text,
                        std::size_t size) noexcept {
  const std::size_t n = at + size <= capacity ? size : capacity - at;
  std::memcpy(out + at, text, n);
  return at + n;
}

std::size_t append_number(char* out, std::size_t at, std::size_t capacity,
                          std::uint64_t value) noexcept {
  char digits[20];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (n > 0 && at < capacity) out[at++] = digits[--n];
  return at;
}

// The last fiber this thread described, and its text: most calls log from the same fiber.
struct ContextCache {
  const FiberControl* fiber = nullptr;
  std::uint64_t id = 0;
  char name[sizeof FiberControl::name] = {};  // set_name may rename a fiber
  std::size_t size = 0;
  char text[tern::log::kMaxContextBytes] = {};
};
constinit thread_local ContextCache cache{};

// "w<worker>" on a worker's own loop, "w<worker> f'<name>'#<id>" in a fiber ("f#<id>" when it
// has no name); 0 off the workers.
std::size_t fiber_context(char* out, std::size_t capacity) noexcept {
  Scheduler* scheduler = Scheduler::current();
  if (scheduler == nullptr) return 0;
  const FiberControl* fiber = scheduler->running();
  if (fiber != cache.fiber || fiber->id != cache.id ||
      std::memcmp(fiber->name, cache.name, sizeof cache.name) != 0) {
    std::size_t n = append_text(cache.text, 0, sizeof cache.text, "w", 1);
    n = append_number(cache.text, n, sizeof cache.text, scheduler->index());
    if (!fiber->is_main) {
      const std::size_t name_size = ::strnlen(fiber->name, sizeof fiber->name);
      if (name_size > 0) {
        n = append_text(cache.text, n, sizeof cache.text, " f'", 3);
        n = append_text(cache.text, n, sizeof cache.text, fiber->name, name_size);
        n = append_text(cache.text, n, sizeof cache.text, "'#", 2);
      } else {
        n = append_text(cache.text, n, sizeof cache.text, " f#", 3);
      }
      n = append_number(cache.text, n, sizeof cache.text, fiber->id);
    }
    cache.fiber = fiber;
    cache.id = fiber->id;
    std::memcpy(cache.name, fiber->name, sizeof cache.name);
    cache.size = n;
  }
  const std::size_t size = cache.size <= capacity ? cache.size : capacity;
  std::memcpy(out, cache.text, size);
  return size;
}

// For fatal messages: `fiber "<name>" (id <n>) on worker <w>` (`fiber <id> ...` when unnamed),
// `worker <w>` on a worker's own loop; 0 off the workers. Async-signal-safe: reads the running
// fiber directly, without the cache above.
std::size_t fatal_context(char* out, std::size_t capacity) noexcept {
  Scheduler* scheduler = Scheduler::current();
  if (scheduler == nullptr) return 0;
  const FiberControl* fiber = scheduler->running();
  std::size_t n = 0;
  if (fiber != nullptr && !fiber->is_main) {
    const std::size_t name_size = ::strnlen(fiber->name, sizeof fiber->name);
    if (name_size > 0) {
      n = append_text(out, n, capacity, "fiber \"", 7);
      n = append_text(out, n, capacity, fiber->name, name_size);
      n = append_text(out, n, capacity, "\" (id ", 6);
    } else {
      n = append_text(out, n, capacity, "fiber (id ", 10);
    }
    n = append_number(out, n, capacity, fiber->id);
    n = append_text(out, n, capacity, ") on ", 5);
  }
  n = append_text(out, n, capacity, "worker ", 7);
  return append_number(out, n, capacity, scheduler->index());
}

}  // namespace

void register_log_context() noexcept {
  tern::log::set_context_provider(&fiber_context);
  tern::set_fatal_context_provider(&fatal_context);
}

}  // namespace tern::detail
