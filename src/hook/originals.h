#pragma once

// The libc functions tern::hook replaces, as libc (or a sanitizer's interceptor of them) defines
// them: what every hooked call falls back to and what the cooperative paths call underneath.

#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <csignal>
#include <cstddef>
#include <ctime>

namespace tern::hook::detail {

struct Originals {
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

// The originals, looked up once (dlsym(RTLD_NEXT), or a sanitizer's interceptor when the
// program is built with one). Any thread.
const Originals& originals() noexcept;

}  // namespace tern::hook::detail
