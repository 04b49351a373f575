// Looks up the functions tern::hook replaces. A sanitizer runtime linked into the program
// defines these names too (weakly, as its interceptors), so the hook's strong definitions win
// and its interceptors would be skipped: where one exists (__interceptor_<name>), the hook calls
// it, so ASan and TSan still see every call; otherwise the next definition, libc's.
//
// The same originals go into tern's own table (tern/base/detail/sys_calls.h) before any other
// static constructor runs, in place of its entries that name a replacement, so that tern's
// reactors and sockets never enter one.
#include "originals.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "tern/base/assert.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/hook/detail/calls.h"

#define TERN_HOOK_INTERCEPTOR(name) extern "C" void __interceptor_##name() __attribute__((weak));
// clang-format off
#define TERN_HOOK_EACH(X)                                                                        \
  X(socket) X(connect) X(accept) X(accept4) X(read) X(write) X(readv) X(writev) X(recv)           \
  X(recvfrom) X(recvmsg) X(send) X(sendto) X(sendmsg) X(poll) X(ppoll) X(select) X(close) X(dup)  \
  X(dup2) X(dup3) X(fcntl) X(ioctl) X(setsockopt) X(sleep) X(usleep) X(nanosleep)                \
  X(getaddrinfo) X(gethostbyname) X(gethostbyname_r) X(epoll_wait) X(epoll_pwait)
// clang-format on

TERN_HOOK_EACH(TERN_HOOK_INTERCEPTOR)

namespace tern::hook::detail {

namespace {

void* find(const char* name, void (*interceptor)()) noexcept {
  if (interceptor != nullptr) return reinterpret_cast<void*>(interceptor);
  void* found = ::dlsym(RTLD_NEXT, name);
  if (found == nullptr) TERN_FATAL("tern::hook: libc has no '{}' (dlsym: {})", name, ::dlerror());
  return found;
}

Originals look_up() noexcept {
  Originals o;
#define TERN_HOOK_FIND(name) \
  o.name = reinterpret_cast<decltype(o.name)>(find(#name, &__interceptor_##name));
  TERN_HOOK_EACH(TERN_HOOK_FIND)
#undef TERN_HOOK_FIND
  return o;
}

std::atomic<bool> counting{false};
std::atomic<std::uint64_t> counted{0};

// Points tern's own table at the originals. Priority 101, the first one a program may use, so
// that it runs before the static constructors of tern and of the program (which may already
// do I/O through tern); the table holds the replacements until then, which work as libc does.
// Only the entries that name a replacement move: the reads and writes a build without a
// sanitizer makes as plain system calls never enter one and stay as they are.
[[gnu::constructor(101)]] void route_tern_past_the_hooks() noexcept {
  const Originals& found = originals();
  tern::detail::SysCalls& sys = tern::detail::sys;
#define TERN_HOOK_ROUTE(name) \
  if (sys.name == &::name) sys.name = found.name;
  TERN_HOOK_EACH(TERN_HOOK_ROUTE)
#undef TERN_HOOK_ROUTE
}

}  // namespace

void note_hooked_call() noexcept {
  if (counting.load(std::memory_order_relaxed)) [[unlikely]] {
    counted.fetch_add(1, std::memory_order_relaxed);
  }
}

const Originals& originals() noexcept {
  note_hooked_call();
  static const Originals found = look_up();
  return found;
}

void count_hooked_calls(bool on) noexcept { counting.store(on, std::memory_order_relaxed); }

std::uint64_t hooked_calls() noexcept { return counted.load(std::memory_order_relaxed); }

}  // namespace tern::hook::detail
