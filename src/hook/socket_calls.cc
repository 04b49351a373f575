// The hooked socket calls. Each goes straight to libc unless the descriptor is a socket the
// program sees as blocking and the caller is a fiber on a worker with a reactor; then it parks
// the fiber instead of the thread and returns what libc would have.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>

#include "cooperative.h"
#include "tern/io/io.h"

using namespace tern::hook::detail;

namespace {

// Before fd is closed or replaced: fibers parked on it are woken (they return EBADF) and the
// hook forgets it. Returns whether it is closed already (through the worker's reactor, which
// drops what it knew about fd with it).
bool retire(int fd) noexcept {
  FdEntry* entry = find_fd(fd);
  if (entry == nullptr) return false;
  const bool parked = entry->waiters.load(std::memory_order_relaxed) > 0;
  const std::uint32_t was = forget_fd(fd);
  if (parked) ::shutdown(fd, SHUT_RDWR);  // wakes parked fibers on every worker
  if ((was & kReactor) != 0 && tern::io::on_reactor_worker()) {
    tern::io::close(fd);
    return true;
  }
  return false;
}

std::int64_t timeout_ns(const void* value, socklen_t length) noexcept {
  if (value == nullptr || length < sizeof(timeval)) return 0;
  const auto* tv = static_cast<const timeval*>(value);
  return static_cast<std::int64_t>(tv->tv_sec) * 1'000'000'000 +
         static_cast<std::int64_t>(tv->tv_usec) * 1'000;
}

int accept_impl(int fd, sockaddr* peer, socklen_t* length, int flags, bool plain) {
  const Originals& libc = originals();
  const bool fiber = cooperative_fd(fd) != nullptr;
  const int kernel_flags = fiber ? flags | SOCK_NONBLOCK : flags;
  const auto accepted = static_cast<int>(blocking_call(fd, false, [&] {
    return static_cast<ssize_t>(plain && !fiber ? libc.accept(fd, peer, length)
                                                : libc.accept4(fd, peer, length, kernel_flags));
  }));
  if (accepted >= 0) {
    adopt_socket(accepted, (flags & SOCK_NONBLOCK) != 0, (kernel_flags & SOCK_NONBLOCK) != 0);
  }
  return accepted;
}

// A write of `length` bytes with a blocking stream socket's outcome: in a fiber, a socket that
// is non-blocking underneath takes what fits and says so; the call goes on until all of it is
// written, as the kernel does for a blocking socket, and reports what was written when a timeout,
// an interrupt or an error ends it part way. call(done) writes from offset `done`.
template <typename Call>
ssize_t write_all(int fd, std::size_t length, Call call) {
  if (cooperative_fd(fd) == nullptr) return blocking_call(fd, true, [&] { return call(0); });
  std::size_t done = 0;
  do {
    const ssize_t n = blocking_call(fd, true, [&] { return call(done); });
    if (n < 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
    done += static_cast<std::size_t>(n);
  } while (done < length);
  return static_cast<ssize_t>(done);
}

// read and recv where fiber_recv does not apply (any socket or thread but a fiber's blocking
// socket), out of line so that the replacements themselves stay a check and a tail call.
[[gnu::noinline]] ssize_t read_elsewhere(int fd, void* buf, size_t count) {
  return blocking_call(fd, false, [&] { return originals().read(fd, buf, count); });
}
[[gnu::noinline]] ssize_t recv_elsewhere(int fd, void* buf, size_t len, int flags) {
  return blocking_call(fd, false, [&] { return originals().recv(fd, buf, len, flags); });
}

int fcntl_impl(int fd, int cmd, void* arg) {
  const Originals& libc = originals();
  FdEntry* entry = find_fd(fd);
  const bool managed = entry != nullptr && (entry->load() & kManaged) != 0;
  switch (cmd) {
    case F_GETFL: {
      const int flags = libc.fcntl(fd, cmd);
      if (flags >= 0 && managed && (entry->load() & kUserNonblock) == 0) return flags & ~O_NONBLOCK;
      return flags;
    }
    case F_SETFL: {
      const int flags = static_cast<int>(reinterpret_cast<std::intptr_t>(arg));
      if (!managed) return libc.fcntl(fd, cmd, flags);
      const bool keep = (entry->load() & kKernelNonblock) != 0;
      const int rc = libc.fcntl(fd, cmd, keep ? flags | O_NONBLOCK : flags);
      if (rc == 0) {
        if ((flags & O_NONBLOCK) != 0) {
          entry->set(kUserNonblock | kKernelNonblock);
        } else {
          entry->clear(kUserNonblock);
        }
      }
      return rc;
    }
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      const int copy = libc.fcntl(fd, cmd, static_cast<int>(reinterpret_cast<std::intptr_t>(arg)));
      if (copy >= 0) copy_fd(fd, copy);
      return copy;
    }
    default:
      return libc.fcntl(fd, cmd, arg);
  }
}

int dup_onto(int from, int to, int flags, bool three) {
  const Originals& libc = originals();
  if (from == to) return three ? libc.dup3(from, to, flags) : libc.dup2(from, to);
  if (find_fd(to) != nullptr && libc.fcntl(from, F_GETFD) >= 0) retire(to);
  const int rc = three ? libc.dup3(from, to, flags) : libc.dup2(from, to);
  if (rc >= 0) copy_fd(from, rc);
  return rc;
}

}  // namespace

// glibc's report of a failed _FORTIFY_SOURCE check; it ends the program.
extern "C" [[noreturn]] void __chk_fail();

extern "C" {

// Named by tern::hook's link options (-u) so that the linker takes this object whole, even when
// another library (a sanitizer's runtime) already defines the names it replaces.
extern const char tern_hook_socket_calls;
const char tern_hook_socket_calls = 0;

int socket(int domain, int type, int protocol) noexcept {
  const bool user_nonblock = (type & SOCK_NONBLOCK) != 0;
  const bool fiber = tern::io::on_reactor_worker();
  const int fd = originals().socket(domain, fiber ? type | SOCK_NONBLOCK : type, protocol);
  if (fd >= 0) adopt_socket(fd, user_nonblock, user_nonblock || fiber);
  return fd;
}

int connect(int fd, const sockaddr* address, socklen_t length) {
  const Originals& libc = originals();
  FdEntry* entry = find_fd(fd);
  if (entry == nullptr || (entry->load() & (kManaged | kUserNonblock)) != kManaged)
    return libc.connect(fd, address, length);
  const bool fiber = tern::io::on_reactor_worker();
  if (!fiber && (entry->load() & kKernelNonblock) == 0) return libc.connect(fd, address, length);
  if (fiber && (entry->load() & kKernelNonblock) == 0 && !make_kernel_nonblock(fd, *entry))
    return -1;
  const std::uint32_t generation = entry->generation.load(std::memory_order_acquire);
  if (libc.connect(fd, address, length) == 0) return 0;
  if (errno != EINPROGRESS) return -1;
  const tern::Deadline deadline =
      deadline_in(entry->send_timeout_ns.load(std::memory_order_relaxed));
  for (;;) {  // a wait may end early (a stale readiness edge): check before trusting SO_ERROR
    pollfd writable = {.fd = fd, .events = POLLOUT, .revents = 0};
    if (libc.poll(&writable, 1, 0) > 0) break;
    if (wait_ready(fd, *entry, true, deadline, generation) != 0) {
      if (errno == EAGAIN) errno = EINPROGRESS;  // what a blocking connect says at SO_SNDTIMEO
      return -1;
    }
  }
  int error = 0;
  socklen_t size = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return -1;
  if (error != 0) {
    errno = error;
    return -1;
  }
  return 0;
}

int accept(int fd, sockaddr* peer, socklen_t* length) {
  return accept_impl(fd, peer, length, 0, true);
}

int accept4(int fd, sockaddr* peer, socklen_t* length, int flags) {
  return accept_impl(fd, peer, length, flags, false);
}

ssize_t read(int fd, void* buf, size_t count) {
  if (FdEntry* entry = cooperative_fd(fd); entry != nullptr)
    return fiber_recv(fd, *entry, buf, count);
  return read_elsewhere(fd, buf, count);
}

ssize_t write(int fd, const void* buf, size_t count) {
  return write_all(fd, count, [&](std::size_t done) {
    return originals().write(fd, static_cast<const char*>(buf) + done, count - done);
  });
}

ssize_t readv(int fd, const iovec* parts, int count) {
  return blocking_call(fd, false, [&] { return originals().readv(fd, parts, count); });
}

ssize_t writev(int fd, const iovec* parts, int count) {
  return blocking_call(fd, true, [&] { return originals().writev(fd, parts, count); });
}

ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* from, socklen_t* from_len) {
  const Originals& libc = originals();
  if ((flags & MSG_DONTWAIT) != 0) return libc.recvfrom(fd, buf, len, flags, from, from_len);
  if ((flags & MSG_WAITALL) == 0 || cooperative_fd(fd) == nullptr) {
    return blocking_call(fd, false,
                         [&] { return libc.recvfrom(fd, buf, len, flags, from, from_len); });
  }
  // MSG_WAITALL on a socket that is non-blocking underneath returns what is there: gather the
  // rest as a blocking socket would, stopping early only at end of stream or an error.
  std::size_t got = 0;
  while (got < len) {
    const ssize_t n = blocking_call(fd, false, [&] {
      return libc.recvfrom(fd, static_cast<char*>(buf) + got, len - got, flags & ~MSG_WAITALL, from,
                           from_len);
    });
    if (n < 0) return got > 0 ? static_cast<ssize_t>(got) : -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  if ((flags & (MSG_DONTWAIT | MSG_WAITALL)) != 0)
    return recvfrom(fd, buf, len, flags, nullptr, nullptr);
  if (flags == 0) {
    if (FdEntry* entry = cooperative_fd(fd); entry != nullptr)
      return fiber_recv(fd, *entry, buf, len);
  }
  return recv_elsewhere(fd, buf, len, flags);
}

ssize_t recvmsg(int fd, msghdr* message, int flags) {
  const Originals& libc = originals();
  if ((flags & MSG_DONTWAIT) != 0) return libc.recvmsg(fd, message, flags);
  return blocking_call(fd, false, [&] { return libc.recvmsg(fd, message, flags); });
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  const Originals& libc = originals();
  if ((flags & MSG_DONTWAIT) != 0) return libc.send(fd, buf, len, flags);
  return write_all(fd, len, [&](std::size_t done) {
    return libc.send(fd, static_cast<const char*>(buf) + done, len - done, flags);
  });
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* to,
               socklen_t to_len) {
  const Originals& libc = originals();
  if ((flags & MSG_DONTWAIT) != 0) return libc.sendto(fd, buf, len, flags, to, to_len);
  return blocking_call(fd, true, [&] { return libc.sendto(fd, buf, len, flags, to, to_len); });
}

ssize_t sendmsg(int fd, const msghdr* message, int flags) {
  const Originals& libc = originals();
  if ((flags & MSG_DONTWAIT) != 0) return libc.sendmsg(fd, message, flags);
  return blocking_call(fd, true, [&] { return libc.sendmsg(fd, message, flags); });
}

// What a library built with _FORTIFY_SOURCE calls instead of read, recv and recvfrom when it
// knows its buffer's size: glibc's bounds check, then the replaced call.
ssize_t __read_chk(int fd, void* buf, size_t count, size_t buffer_size) {
  if (count > buffer_size) __chk_fail();
  return read(fd, buf, count);
}

ssize_t __recv_chk(int fd, void* buf, size_t len, size_t buffer_size, int flags) {
  if (len > buffer_size) __chk_fail();
  return recv(fd, buf, len, flags);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t len, size_t buffer_size, int flags, sockaddr* from,
                       socklen_t* from_len) {
  if (len > buffer_size) __chk_fail();
  return recvfrom(fd, buf, len, flags, from, from_len);
}

int close(int fd) {
  if (retire(fd)) return 0;
  return originals().close(fd);
}

int dup(int fd) noexcept {
  const int copy = originals().dup(fd);
  if (copy >= 0) copy_fd(fd, copy);
  return copy;
}

int dup2(int from, int to) noexcept { return dup_onto(from, to, 0, false); }

int dup3(int from, int to, int flags) noexcept { return dup_onto(from, to, flags, true); }

int fcntl(int fd, int cmd, ...) {
  va_list args;
  va_start(args, cmd);
  void* arg = va_arg(args, void*);
  va_end(args);
  return fcntl_impl(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...) {
  va_list args;
  va_start(args, cmd);
  void* arg = va_arg(args, void*);
  va_end(args);
  return fcntl_impl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...) noexcept {
  va_list args;
  va_start(args, request);
  void* arg = va_arg(args, void*);
  va_end(args);
  const Originals& libc = originals();
  FdEntry* entry = find_fd(fd);
  if (request != FIONBIO || arg == nullptr || entry == nullptr || (entry->load() & kManaged) == 0)
    return libc.ioctl(fd, request, arg);
  const bool on = *static_cast<const int*>(arg) != 0;
  if (!on && (entry->load() & kKernelNonblock) != 0) {
    entry->clear(kUserNonblock);  // the kernel keeps O_NONBLOCK; the program sees it off
    return 0;
  }
  const int rc = libc.ioctl(fd, request, arg);
  if (rc == 0 && on) entry->set(kUserNonblock | kKernelNonblock);
  return rc;
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t length) noexcept {
  const int rc = originals().setsockopt(fd, level, name, value, length);
  if (rc != 0 || level != SOL_SOCKET || (name != SO_RCVTIMEO && name != SO_SNDTIMEO)) return rc;
  if (FdEntry* entry = find_fd(fd); entry != nullptr && (entry->load() & kManaged) != 0) {
    (name == SO_RCVTIMEO ? entry->recv_timeout_ns : entry->send_timeout_ns)
        .store(timeout_ns(value, length), std::memory_order_relaxed);
  }
  return rc;
}

}  // extern "C"
