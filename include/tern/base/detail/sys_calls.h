#pragma once

// How tern's own code calls the libc functions tern::hook replaces: through this table, never by
// name. In a program without tern::hook it holds libc's functions, but for read, write, readv,
// writev, recv, recvfrom, recvmsg, send, sendto and sendmsg: those are plain system calls that
// skip the cancellation-point bookkeeping of libc's wrappers (unless the build has a sanitizer,
// whose interceptors must see them). tern::hook, when linked, points its other entries at the
// same originals its replacements fall back to (libc's, or a sanitizer's interceptors of them, so
// ASan and TSan still see tern's calls) before any static constructor of tern runs, so tern's
// reactors, sockets, log and runtime never take the hook's detour.
//
// Why a table of pointers: a call by name from tern would bind to the hook's definition the
// moment the program links tern::hook (the executable defines the name). A call through the
// table is one indirect call, the same cost as the PLT call it replaces, with no branch added.
// The table lives in base because log and fiber, below io, call these functions too.
//
// Read it from any thread; only tern::hook writes it, once, before main.

#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <ctime>

namespace tern::detail {

struct SysCalls {
  int (*socket)(int, int, int);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*accept)(int, sockaddr*, socklen_t*);
  int (*accept4)(int, sockaddr*, socklen_t*, int);
  ssize_t (*read)(int, void*, std::size_t);
  ssize_t (*write)(int, const void*, std::size_t);
  ssize_t (*readv)(int, const iovec*, int);
  ssize_t (*writev)(int, const iovec*, int);
  ssize_t (*recv)(int, void*, std::size_t, int);
  ssize_t (*recvfrom)(int, void*, std::size_t, int, sockaddr*, socklen_t*);
  ssize_t (*recvmsg)(int, msghdr*, int);
  ssize_t (*send)(int, const void*, std::size_t, int);
  ssize_t (*sendto)(int, const void*, std::size_t, int, const sockaddr*, socklen_t);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  int (*poll)(pollfd*, nfds_t, int);
  int (*ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
  int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
  int (*close)(int);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*ioctl)(int, unsigned long, ...);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  unsigned (*sleep)(unsigned);
  int (*usleep)(useconds_t);
  int (*nanosleep)(const timespec*, timespec*);
  int (*getaddrinfo)(const char*, const char*, const addrinfo*, addrinfo**);
  hostent* (*gethostbyname)(const char*);
  int (*gethostbyname_r)(const char*, hostent*, char*, std::size_t, hostent**, int*);
  int (*epoll_wait)(int, epoll_event*, int, int);
  int (*epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
};

// The functions tern's own code calls, e.g. `detail::sys.read(fd, buf, len)`. Any thread.
extern constinit SysCalls sys;

// Blocks the calling thread for `ns` nanoseconds through sys.nanosleep, resuming after signals:
// what tern uses instead of std::this_thread::sleep_for, which calls the replaceable nanosleep.
// Any thread.
void sleep_thread(std::int64_t ns) noexcept;

}  // namespace tern::detail
