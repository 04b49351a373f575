// Looks up the functions tern::hook replaces. A sanitizer runtime linked into the program
// defines these names too (weakly, as its interceptors), so the hook's strong definitions win
// and its interceptors would be skipped: where one exists (__interceptor_<name>), the hook calls
// it, so ASan and TSan still see every call; otherwise the next definition, libc's.
#include "originals.h"

#include <dlfcn.h>

#include "tern/base/assert.h"

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

}  // namespace

const Originals& originals() noexcept {
  static const Originals found = look_up();
  return found;
}

}  // namespace tern::hook::detail
