// The free functions of tern/io/io.h: each forwards to the calling worker's reactor (try_send is
// a plain system call).
#include "tern/io/io.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "reactor.h"
#include "tern/base/assert.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/fiber/runtime.h"
#include "tern/prof/counter.h"

namespace tern::io {

namespace {

prof::Counter bytes_read("io.bytes_read", "Bytes received by tern::io reads (read, recv, recvmsg)");
prof::Counter bytes_written("io.bytes_written",
                            "Bytes sent by tern::io writes (write, send, sendmsg)");

detail::Reactor& reactor(const char* operation) {
  detail::Reactor* current = detail::Reactor::current();
  if (current == nullptr) {
    if (Runtime::current() == nullptr) {
      TERN_FATAL(
          "tern::io::{} called outside a tern::Runtime: call it from a fiber (inside "
          "Runtime::run)",
          operation);
    }
    TERN_FATAL(
        "tern::io::{} needs a worker with a reactor, and this runtime's workers have none "
        "(RuntimeOptions::make_parker made other parkers; use tern::io::reactors)",
        operation);
  }
  return *current;
}

// A wait that ended at its deadline reads as one ("deadline exceeded", still equal to
// std::errc::timed_out); the kernel's own ETIMEDOUT (system_category) stays as it is. Only for
// failures, out of line and in place: the operations' successes return the reactor's result as
// constructed, with no copy and no comparison.
template <typename T>
[[gnu::cold, gnu::noinline]] void name_deadline(Result<T>& result) {
  if (result.error() == std::make_error_code(std::errc::timed_out))
    result = fail(deadline_exceeded());
}

// named_deadline for operations that count no bytes.
template <typename T>
Result<T> named_deadline(Result<T> result) {
  if (!result) [[unlikely]]
    name_deadline(result);
  return result;
}

// Runs an operation that moves bytes and adds what it moved to `bytes`, or names a deadline it
// missed. Inline: a success returns the reactor's result in place, with no copy.
template <typename Operation>
Result<std::size_t> counted(prof::Counter& bytes, Operation operation) {
  Result<std::size_t> n = operation();
  if (n) [[likely]]
    bytes.add(*n);
  else
    name_deadline(n);
  return n;
}

}  // namespace

Result<std::size_t> read(int fd, std::span<std::byte> buf, WaitLimit limit) {
  return counted(bytes_read,
                 [&] { return reactor("read").read(fd, buf.data(), buf.size(), limit); });
}

Result<std::size_t> write(int fd, std::span<const std::byte> buf, WaitLimit limit) {
  return counted(bytes_written,
                 [&] { return reactor("write").write(fd, buf.data(), buf.size(), limit); });
}

Result<std::size_t> recv(int fd, std::span<std::byte> buf, int flags, WaitLimit limit) {
  return counted(bytes_read,
                 [&] { return reactor("recv").recv(fd, buf.data(), buf.size(), flags, limit); });
}

Result<std::size_t> send(int fd, std::span<const std::byte> buf, int flags, WaitLimit limit) {
  return counted(bytes_written,
                 [&] { return reactor("send").send(fd, buf.data(), buf.size(), flags, limit); });
}

Result<std::size_t> try_send(int fd, std::span<const std::byte> buf) noexcept {
  for (;;) {
    const ssize_t n =
        tern::detail::sys.send(fd, buf.data(), buf.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      bytes_written.add(static_cast<std::uint64_t>(n));
      return static_cast<std::size_t>(n);
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::size_t{0};
    if (errno != EINTR) return fail(std::error_code(errno, std::system_category()));
  }
}

Result<std::size_t> recvmsg(int fd, msghdr* message, int flags, WaitLimit limit) {
  return counted(bytes_read, [&] { return reactor("recvmsg").recvmsg(fd, message, flags, limit); });
}

Result<std::size_t> sendmsg(int fd, const msghdr* message, int flags, WaitLimit limit) {
  return counted(bytes_written,
                 [&] { return reactor("sendmsg").sendmsg(fd, message, flags, limit); });
}

Result<int> accept(int fd, sockaddr* peer, socklen_t* peer_length, Deadline deadline) {
  return named_deadline(reactor("accept").accept(fd, peer, peer_length, deadline));
}

Result<void> connect(int fd, const sockaddr* address, socklen_t length, Deadline deadline) {
  return named_deadline(reactor("connect").connect(fd, address, length, deadline));
}

Result<void> wait_readable(int fd, Deadline deadline) {
  return named_deadline(reactor("wait_readable").wait_ready(fd, false, deadline));
}

Result<void> wait_data(int fd, Deadline deadline) {
  return named_deadline(reactor("wait_data").wait_data(fd, deadline));
}

Result<void> wait_writable(int fd, Deadline deadline) {
  return named_deadline(reactor("wait_writable").wait_ready(fd, true, deadline));
}

void declare_tcp(int fd) noexcept {
  if (detail::Reactor* current = detail::Reactor::current(); current != nullptr)
    current->declare_tcp(fd);
}

bool more_queued(int fd) noexcept {
  const detail::Reactor* current = detail::Reactor::current();
  return current != nullptr && current->more_queued(fd);
}

void close(int fd) noexcept {
  detail::Reactor* current = detail::Reactor::current();
  if (current != nullptr) {
    current->close(fd);
  } else if (fd >= 0) {
    tern::detail::sys.close(fd);
  }
}

}  // namespace tern::io
