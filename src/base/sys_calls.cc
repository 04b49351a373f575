// The table tern's own code calls libc through (tern/base/detail/sys_calls.h). Its starting
// values are constant, so it holds them before any code runs. In a program that links
// tern::hook, `&::read` here names the hook's replacement (the executable defines `read`), and
// the hook overwrites every entry with its originals before any static constructor of tern runs.
#include "tern/base/detail/sys_calls.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

// Whether a sanitizer that intercepts libc's I/O functions is in the build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TERN_SYS_INTERCEPTED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define TERN_SYS_INTERCEPTED 1
#endif
#endif

namespace tern::detail {

namespace {

// The reads and writes the reactors make for every message, as plain system calls: libc's
// wrappers are cancellation points, which update the thread's cancellation state (two atomic
// read-modify-writes) around every call, and tern never cancels a thread. With a sanitizer the
// table keeps libc's functions, whose interceptors must see the calls. (syscall() takes longs:
// narrower arguments are widened here.)
#if TERN_SYS_INTERCEPTED
#define TERN_SYS_DIRECT(name, direct) &::name
#else
#define TERN_SYS_DIRECT(name, direct) &direct

ssize_t direct_read(int fd, void* buf, std::size_t len) {
  return ::syscall(SYS_read, fd, buf, len);
}
ssize_t direct_write(int fd, const void* buf, std::size_t len) {
  return ::syscall(SYS_write, fd, buf, len);
}
ssize_t direct_readv(int fd, const iovec* iov, int count) {
  return ::syscall(SYS_readv, fd, iov, static_cast<unsigned long>(count));
}
ssize_t direct_writev(int fd, const iovec* iov, int count) {
  return ::syscall(SYS_writev, fd, iov, static_cast<unsigned long>(count));
}
ssize_t direct_recv(int fd, void* buf, std::size_t len, int flags) {
  return ::syscall(SYS_recvfrom, fd, buf, len, static_cast<long>(flags), nullptr, nullptr);
}
ssize_t direct_recvfrom(int fd, void* buf, std::size_t len, int flags, sockaddr* from,
                        socklen_t* from_len) {
  return ::syscall(SYS_recvfrom, fd, buf, len, static_cast<long>(flags), from, from_len);
}
ssize_t direct_recvmsg(int fd, msghdr* message, int flags) {
  return ::syscall(SYS_recvmsg, fd, message, static_cast<long>(flags));
}
ssize_t direct_send(int fd, const void* buf, std::size_t len, int flags) {
  return ::syscall(SYS_sendto, fd, buf, len, static_cast<long>(flags), nullptr, 0L);
}
ssize_t direct_sendto(int fd, const void* buf, std::size_t len, int flags, const sockaddr* to,
                      socklen_t to_len) {
  return ::syscall(SYS_sendto, fd, buf, len, static_cast<long>(flags), to,
                   static_cast<long>(to_len));
}
ssize_t direct_sendmsg(int fd, const msghdr* message, int flags) {
  return ::syscall(SYS_sendmsg, fd, message, static_cast<long>(flags));
}
#endif

}  // namespace

constinit SysCalls sys = {
    .socket = &::socket,
    .connect = &::connect,
    .accept = &::accept,
    .accept4 = &::accept4,
    .read = TERN_SYS_DIRECT(read, direct_read),
    .write = TERN_SYS_DIRECT(write, direct_write),
    .readv = TERN_SYS_DIRECT(readv, direct_readv),
    .writev = TERN_SYS_DIRECT(writev, direct_writev),
    .recv = TERN_SYS_DIRECT(recv, direct_recv),
    .recvfrom = TERN_SYS_DIRECT(recvfrom, direct_recvfrom),
    .recvmsg = TERN_SYS_DIRECT(recvmsg, direct_recvmsg),
    .send = TERN_SYS_DIRECT(send, direct_send),
    .sendto = TERN_SYS_DIRECT(sendto, direct_sendto),
    .sendmsg = TERN_SYS_DIRECT(sendmsg, direct_sendmsg),
    .poll = &::poll,
    .ppoll = &::ppoll,
    .select = &::select,
    .close = &::close,
    .dup = &::dup,
    .dup2 = &::dup2,
    .dup3 = &::dup3,
    .fcntl = &::fcntl,
    .ioctl = &::ioctl,
    .setsockopt = &::setsockopt,
    .sleep = &::sleep,
    .usleep = &::usleep,
    .nanosleep = &::nanosleep,
    .getaddrinfo = &::getaddrinfo,
    .gethostbyname = &::gethostbyname,
    .gethostbyname_r = &::gethostbyname_r,
    .epoll_wait = &::epoll_wait,
    .epoll_pwait = &::epoll_pwait,
};

#undef TERN_SYS_DIRECT

void sleep_thread(std::int64_t ns) noexcept {
  timespec left = {.tv_sec = static_cast<time_t>(ns / 1'000'000'000),
                   .tv_nsec = static_cast<long>(ns % 1'000'000'000)};
  while (sys.nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

}  // namespace tern::detail
