#pragma once

#include <sys/socket.h>

#include <cstddef>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/wait_limit.h"
#include "tern/fiber/park.h"
#include "tern/io/backend.h"

namespace tern::io::detail {

// A worker's reactor: the Parker its scheduler sleeps in, and the fiber-blocking I/O
// operations behind tern/io/io.h. One per worker; everything runs on that worker's thread.
class Reactor : public Parker {
  // The calling thread's reactor (constinit: read without a thread_local wrapper call).
  static constinit thread_local Reactor* current_reactor_;

 public:
  explicit Reactor(Backend backend) noexcept;
  ~Reactor() override;
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // The reactor of the calling worker, or nullptr. Any thread. Inline: every I/O operation
  // starts here, and a call would make its caller save its arguments across it.
  static Reactor* current() noexcept { return current_reactor_; }
  Backend backend() const noexcept { return backend_; }

  // The operations that move bytes take a WaitLimit: an idle timeout's deadline is computed
  // only by an operation that has to wait.
  virtual Result<std::size_t> read(int fd, void* buf, std::size_t len, WaitLimit limit) = 0;
  virtual Result<std::size_t> write(int fd, const void* buf, std::size_t len, WaitLimit limit) = 0;
  virtual Result<std::size_t> recv(int fd, void* buf, std::size_t len, int flags,
                                   WaitLimit limit) = 0;
  virtual Result<std::size_t> send(int fd, const void* buf, std::size_t len, int flags,
                                   WaitLimit limit) = 0;
  virtual Result<std::size_t> recvmsg(int fd, msghdr* message, int flags, WaitLimit limit) = 0;
  virtual Result<std::size_t> sendmsg(int fd, const msghdr* message, int flags,
                                      WaitLimit limit) = 0;
  virtual Result<int> accept(int fd, sockaddr* peer, socklen_t* length, Deadline deadline) = 0;
  virtual Result<void> connect(int fd, const sockaddr* address, socklen_t length,
                               Deadline deadline) = 0;
  virtual Result<void> wait_ready(int fd, bool writable, Deadline deadline) = 0;
  // Waits until fd has bytes to read, end of stream or an error, judged by the socket's present
  // state: unlike wait_ready on an edge-triggered backend, never waits for an edge whose data
  // came (and stayed unread) before the call.
  virtual Result<void> wait_data(int fd, Deadline deadline) = 0;
  virtual void close(int fd) noexcept = 0;
  // fd is a TCP socket this worker will use: a backend that learns a socket's kind when it first
  // waits on it can skip that probe. Does nothing by default.
  virtual void declare_tcp(int /*fd*/) noexcept {}
  // Whether the last plain recv on fd left bytes in its receive queue, as the kernel said with
  // that recv (TCP_INQ, IORING_CQE_F_SOCK_NONEMPTY); false when it did not say. No default
  // knowledge: false.
  virtual bool more_queued(int /*fd*/) const noexcept { return false; }

 private:
  Backend backend_;
  Reactor* previous_;
};

// Makes a reactor of the given backend for the calling worker thread; on failure (io_uring
// refused by the kernel), the reason.
Result<std::unique_ptr<Reactor>> make_epoll_reactor();
Result<std::unique_ptr<Reactor>> make_uring_reactor();

// Whether a plain recv (flags 0) of up to len bytes that returned n left the socket's queue
// empty: it read something, and either fewer bytes than asked or the kernel said nothing was
// left. Both backends then let the next recv wait for data before it tries. Any thread.
inline bool recv_emptied_queue(int flags, const Result<std::size_t>& n, std::size_t len,
                               bool nothing_left) noexcept {
  return flags == 0 && n && *n > 0 && (*n < len || nothing_left);
}

// Whether fd has bytes to read, end of stream or an error right now (poll with no wait). Any
// thread.
bool readable_now(int fd) noexcept;

// wait_data's end for a wait that ran out of time: the socket's present state decides (data
// whose edge was reported but not yet handled, or a deadline that had passed before the call).
inline Result<void> settle_timed_out_wait(int fd, Result<void> waited) noexcept {
  if (!waited && waited.error() == std::errc::timed_out && readable_now(fd)) return {};
  return waited;
}

// An error_code for an errno value.
inline std::error_code errno_code(int err) noexcept { return {err, std::system_category()}; }

// The outcome of a non-blocking connect on fd once it is writable (SO_ERROR). Any thread.
Result<void> connect_outcome(int fd) noexcept;

}  // namespace tern::io::detail
