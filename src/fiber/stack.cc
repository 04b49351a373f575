#include "stack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "tern/fiber/sanitizer.h"

namespace tern::detail {

namespace {

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102  // Linux 6.13: guard pages that do not split the mapping
#endif

constexpr std::size_t kGuardPages = 2;

// Lightweight guards keep one VMA per stack (or fewer: the kernel merges neighbours), so
// hundreds of thousands of fibers stay under vm.max_map_count; older kernels get mprotect.
std::atomic<bool> lightweight_guards{true};

bool install_guard(void* addr, std::size_t len) noexcept {
  if (lightweight_guards.load(std::memory_order_relaxed)) {
    if (::madvise(addr, len, MADV_GUARD_INSTALL) == 0) return true;
    lightweight_guards.store(false, std::memory_order_relaxed);
  }
  return ::mprotect(addr, len, PROT_NONE) == 0;
}

}  // namespace

Result<Stack> map_stack(std::size_t size) {
  Stack stack;
  stack.size = stack_size_for(size);
  const std::size_t guard = kGuardPages * page_size();
  stack.mapping_size = stack.size + guard;
  void* mapping = ::mmap(nullptr, stack.mapping_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) return fail(std::error_code(errno, std::system_category()));
  // Stacks are touched a page or two at a time: transparent huge pages would turn each into
  // 2 MiB of resident memory on hosts set to "always".
  ::madvise(mapping, stack.mapping_size, MADV_NOHUGEPAGE);
  if (!install_guard(mapping, guard)) {
    const int err = errno;
    ::munmap(mapping, stack.mapping_size);
    return fail(std::error_code(err, std::system_category()));
  }
  stack.mapping = mapping;
  stack.base = static_cast<char*>(mapping) + guard;
  return stack;
}

Result<void> map_stacks(std::size_t size, std::size_t count, std::vector<Stack>& out) {
  const std::size_t usable = stack_size_for(size);
  const std::size_t guard = kGuardPages * page_size();
  const std::size_t each = usable + guard;
  void* mapping = ::mmap(nullptr, each * count, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) return fail(std::error_code(errno, std::system_category()));
  ::madvise(mapping, each * count, MADV_NOHUGEPAGE);  // as map_stack
  char* const start = static_cast<char*>(mapping);
  for (std::size_t i = 0; i < count; ++i) {
    char* const at = start + i * each;
    if (!install_guard(at, guard)) {
      const int err = errno;
      ::munmap(start + i * each, (count - i) * each);  // the stacks already made are kept
      if (i == 0) return fail(std::error_code(err, std::system_category()));
      return {};
    }
    out.push_back(Stack{.mapping = at, .mapping_size = each, .base = at + guard, .size = usable});
  }
  return {};
}

void unmap_stack(const Stack& stack) noexcept {
  if (stack.mapping == nullptr) return;
#if TERN_ASAN
  // AddressSanitizer keeps a region's poison (a parked fiber's frames, a shared stack's unused
  // part) after munmap: a later mapping at the same address would start poisoned.
  ASAN_UNPOISON_MEMORY_REGION(stack.mapping, stack.mapping_size);
#endif
  ::munmap(stack.mapping, stack.mapping_size);
}

StackPool::~StackPool() {
  for (const Stack& s : free_) unmap_stack(s);
}

Result<Stack> StackPool::take(std::size_t size) {
  const std::size_t wanted = stack_size_for(size);
  if (!free_.empty() && free_.back().size == wanted) {  // the last one given back: warm
    const Stack s = free_.back();
    free_.pop_back();
    low_water_ = std::min(low_water_, free_.size());
    return s;
  }
  for (std::size_t i = free_.size(); i-- > 0;) {
    if (free_[i].size == wanted) {
      Stack s = free_[i];
      free_[i] = free_.back();
      free_.pop_back();
      low_water_ = std::min(low_water_, free_.size());
      return s;
    }
  }
  // A few fibers, or no room to cache a batch's rest: one stack.
  if (mapped_ < kMapBatch || free_.size() + kMapBatch > max_cached_) {
    Result<Stack> one = map_stack(wanted);
    if (one) ++mapped_;
    return one;
  }
  if (!map_stacks(wanted, kMapBatch, free_)) return map_stack(wanted);
  const Stack s = free_.back();
  free_.pop_back();
  return s;
}

void StackPool::give(const Stack& stack) noexcept {
  if (free_.size() < burst_cached_) {
    free_.push_back(stack);
  } else {
    unmap_stack(stack);
  }
}

void StackPool::trim() noexcept {
  const std::size_t unused = std::min(low_water_, free_.size());
  if (unused > max_cached_) {
    // The front holds the stacks given back longest ago (take() prefers the back).
    const std::size_t excess = unused - max_cached_;
    for (std::size_t i = 0; i < excess; ++i) unmap_stack(free_[i]);
    free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(excess));
  }
  low_water_ = free_.size();
}

}  // namespace tern::detail
