// The io_uring backend: each operation is a submission whose completion wakes the fiber.
// Submissions are batched and flushed each time the worker's loop runs (poll) or sleeps (park).
// A listener gets one multishot accept (one completion per connection) where the kernel has it.
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "reactor.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/fiber/detail/parked_node.h"
#include "tern/fiber/detail/waiter.h"
#include "tern/prof/loop_profiler.h"

namespace tern::io::detail {

namespace {

constexpr unsigned kRingEntries = 1024;
constexpr std::uint64_t kIgnoredTag = 0;  // completions of cancel requests
constexpr std::uint64_t kWakeTag = 1;     // the eventfd that unpark() writes

// One operation in flight; lives on the waiting fiber's stack (the heap for a shared-stack
// fiber) until its completion arrives.
struct UringOp {
  tern::detail::Waiter waiter;
  int result = 0;
  unsigned flags = 0;  // the completion's IORING_CQE_F_* bits
  bool done = false;
};

// A listening socket's multishot accept: one submission that yields a completion per
// connection. Connections accepted before anyone asks wait in `ready`.
struct AcceptStream {
  int listener = -1;
  bool armed = false;     // the multishot submission is in flight
  bool closed = false;    // the listener was closed; freed at its last completion
  std::deque<int> ready;  // accepted descriptors, or -errno
  tern::detail::WaitList waiters;
};

constexpr std::uint64_t kAcceptStreamBit = 2;  // tags of AcceptStream completions (pointer | 2)

class UringReactor final : public Reactor {
 public:
  UringReactor(const io_uring& ring, int wake_fd)
      : Reactor(Backend::uring),
        ring_(ring),
        wake_(wake_fd),
        // Rings set up with cooperative or deferred task running come from kernels that
        // also take IORING_RECVSEND_POLL_FIRST (both arrived in 5.19).
        poll_first_((ring.flags & (IORING_SETUP_COOP_TASKRUN | IORING_SETUP_DEFER_TASKRUN)) != 0) {}
  ~UringReactor() override {
    for (auto& [fd, stream] : accept_streams_)
      for (int accepted : stream->ready)
        if (accepted >= 0) tern::detail::sys.close(accepted);
    io_uring_queue_exit(&ring_);
    tern::detail::sys.close(wake_);
  }

  void park(Deadline deadline) override {
    if (!wake_armed_) arm_wake();
    if (deadline == Deadline::min()) {
      io_uring_submit(&ring_);
    } else {
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec timeout = {};
      __kernel_timespec* timeout_ptr = nullptr;
      if (deadline != kNoDeadline) {
        auto remaining = deadline - Clock::now();
        if (remaining < Clock::duration::zero()) remaining = Clock::duration::zero();
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(remaining).count();
        timeout.tv_sec = ns / 1'000'000'000;
        timeout.tv_nsec = ns % 1'000'000'000;
        timeout_ptr = &timeout;
      }
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, timeout_ptr, nullptr);
    }
    reap();
  }
  void poll() override {
    if (io_uring_sq_ready(&ring_) > 0) {
      io_uring_submit(&ring_);
    } else if ((IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) != 0) {
      io_uring_get_events(&ring_);  // completions wait for this thread to enter the kernel
    }
    reap();
  }
  void unpark() noexcept override {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = tern::detail::sys.write(wake_, &one, sizeof one);
  }

  Result<std::size_t> read(int fd, void* buf, std::size_t len, WaitLimit limit) override {
    if (tern::detail::parks_off_stack())
      return by_readiness(fd, false, limit, [&] { return tern::detail::sys.read(fd, buf, len); });
    return bytes(fd, false, limit, [&](io_uring_sqe* sqe) {
      io_uring_prep_read(sqe, fd, buf, static_cast<unsigned>(len), static_cast<__u64>(-1));
    });
  }
  Result<std::size_t> write(int fd, const void* buf, std::size_t len, WaitLimit limit) override {
    if (tern::detail::parks_off_stack())
      return by_readiness(fd, true, limit, [&] { return tern::detail::sys.write(fd, buf, len); });
    return bytes(fd, true, limit, [&](io_uring_sqe* sqe) {
      io_uring_prep_write(sqe, fd, buf, static_cast<unsigned>(len), static_cast<__u64>(-1));
    });
  }
  Result<std::size_t> recv(int fd, void* buf, std::size_t len, int flags,
                           WaitLimit limit) override {
    if (tern::detail::parks_off_stack()) {
      return by_readiness(fd, false, limit, [&] {
        return tern::detail::sys.recv(fd, buf, len, flags | MSG_DONTWAIT);
      });
    }
    // After a recv that emptied the socket's queue, the next one would only fail its first
    // attempt: ask the kernel to wait for data before trying (one failed receive less per
    // message in request/reply traffic). If data is there already, the poll fires at once.
    const bool poll_first = poll_first_ && flags == 0 && was_drained(fd);
    unsigned cqe_flags = 0;
    Result<std::size_t> n = bytes(
        fd, false, limit,
        [&](io_uring_sqe* sqe) {
          io_uring_prep_recv(sqe, fd, buf, len, flags);
          if (poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
        },
        &cqe_flags);
    if (!n && poll_first && n.error() == std::errc::invalid_argument) {
      poll_first_ = false;  // a kernel without the flag: receive as before
      return recv(fd, buf, len, flags, limit);
    }
    const bool nonempty = (cqe_flags & IORING_CQE_F_SOCK_NONEMPTY) != 0;
    note_drained(fd, recv_emptied_queue(flags, n, len, !nonempty),
                 flags == 0 && n && *n > 0 && nonempty);
    return n;
  }
  Result<std::size_t> send(int fd, const void* buf, std::size_t len, int flags,
                           WaitLimit limit) override {
    if (tern::detail::parks_off_stack()) {
      return by_readiness(fd, true, limit, [&] {
        return tern::detail::sys.send(fd, buf, len, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
      });
    }
    return bytes(fd, true, limit, [&](io_uring_sqe* sqe) {
      io_uring_prep_send(sqe, fd, buf, len, flags | MSG_NOSIGNAL);
    });
  }
  Result<std::size_t> recvmsg(int fd, msghdr* message, int flags, WaitLimit limit) override {
    if (tern::detail::parks_off_stack()) {
      return by_readiness(fd, false, limit, [&] {
        return tern::detail::sys.recvmsg(fd, message, flags | MSG_DONTWAIT);
      });
    }
    return bytes(fd, false, limit, [&](io_uring_sqe* sqe) {
      io_uring_prep_recvmsg(sqe, fd, message, static_cast<unsigned>(flags));
    });
  }
  Result<std::size_t> sendmsg(int fd, const msghdr* message, int flags, WaitLimit limit) override {
    if (tern::detail::parks_off_stack()) {
      return by_readiness(fd, true, limit, [&] {
        return tern::detail::sys.sendmsg(fd, message, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
      });
    }
    return bytes(fd, true, limit, [&](io_uring_sqe* sqe) {
      io_uring_prep_sendmsg(sqe, fd, message, static_cast<unsigned>(flags | MSG_NOSIGNAL));
    });
  }
  Result<int> accept(int fd, sockaddr* peer, socklen_t* length, Deadline deadline) override {
    if (!multishot_accept_) return accept_once(fd, peer, length, deadline);
    AcceptStream& stream = accept_stream(fd);
    const AcceptStream* const mine = &stream;
    for (;;) {
      if (!stream.ready.empty()) {
        const int accepted = stream.ready.front();
        stream.ready.pop_front();
        if (accepted < 0) return fail(errno_code(-accepted));
        if (peer != nullptr && ::getpeername(accepted, peer, length) != 0) *length = 0;
        return accepted;
      }
      if (!multishot_accept_) return accept_once(fd, peer, length, deadline);
      if (!stream.armed) arm_accept(stream);
      const tern::detail::ParkedNode<tern::detail::Waiter> node(tern::detail::parks_off_stack());
      tern::detail::Waiter& waiter = *node;
      waiter.fiber = tern::detail::current_fiber("tern::io::accept");
      tern::detail::begin_wait(waiter.fiber);
      stream.waiters.push_back(waiter);
      const std::error_code result = tern::detail::wait(waiter.fiber, deadline, true);
      if (!waiter.fired) {
        tern::detail::withdraw(stream.waiters, waiter);
        return fail(result);
      }
      if (waiter.closed) return fail(std::errc::operation_canceled);
      // Woken by a connection, the listener may still have been closed before this fiber's
      // turn: its stream is retired (or freed), and waiting on it again would never end.
      if (find_accept_stream(fd) != mine) return fail(std::errc::operation_canceled);
    }
  }
  Result<void> connect(int fd, const sockaddr* address, socklen_t length,
                       Deadline deadline) override {
    if (tern::detail::parks_off_stack()) {  // the address may be on the shared stack
      if (tern::detail::sys.connect(fd, address, length) == 0) return {};
      if (errno != EINPROGRESS && errno != EAGAIN) return fail(errno_code(errno));
      if (Result<void> ready = wait_ready(fd, true, deadline); !ready) return ready;
      return connect_outcome(fd);
    }
    WaitLimit limit = deadline;
    Result<int> done =
        run(limit, [&](io_uring_sqe* sqe) { io_uring_prep_connect(sqe, fd, address, length); });
    if (done) return {};
    if (done.error() != std::errc::operation_in_progress &&
        done.error() != std::errc::resource_unavailable_try_again &&
        done.error() != std::errc::connection_already_in_progress)
      return fail(done.error());
    if (Result<void> ready = wait_ready(fd, true, deadline); !ready) return ready;
    return connect_outcome(fd);
  }
  Result<void> wait_ready(int fd, bool writable, Deadline deadline) override {
    WaitLimit limit = deadline;
    Result<int> ready = run(limit, [&](io_uring_sqe* sqe) {
      io_uring_prep_poll_add(sqe, fd, writable ? POLLOUT : POLLIN);
    });
    if (!ready) return fail(ready.error());
    return {};
  }
  // A poll request reports the socket's present state (it is level-triggered); a deadline that
  // had passed before it was submitted is settled by asking the socket.
  Result<void> wait_data(int fd, Deadline deadline) override {
    return settle_timed_out_wait(fd, wait_ready(fd, false, deadline));
  }
  void close(int fd) noexcept override {
    if (fd < 0) return;
    note_drained(fd, false, false);
    if (auto found = accept_streams_.find(fd); found != accept_streams_.end()) {
      retire(std::move(found->second));
      accept_streams_.erase(found);
    }
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, kIgnoredTag);
    // Also runs the cancelled operations' completions (deferred task running holds them until
    // this thread asks for events), so they drop their hold on the socket before close().
    io_uring_submit_and_get_events(&ring_);
    tern::detail::sys.close(fd);
  }

 private:
  Result<int> accept_once(int fd, sockaddr* peer, socklen_t* length, Deadline deadline) {
    if (tern::detail::parks_off_stack()) {
      Result<std::size_t> accepted = by_readiness(fd, false, deadline, [&] {
        return static_cast<ssize_t>(
            tern::detail::sys.accept4(fd, peer, length, SOCK_NONBLOCK | SOCK_CLOEXEC));
      });
      if (!accepted) return fail(accepted.error());
      return static_cast<int>(*accepted);
    }
    WaitLimit limit = deadline;
    Result<std::size_t> accepted = bytes(fd, false, limit, [&](io_uring_sqe* sqe) {
      io_uring_prep_accept(sqe, fd, peer, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    });
    if (!accepted) return fail(accepted.error());
    return static_cast<int>(*accepted);
  }

  // The live accept stream of listener fd, or nullptr.
  const AcceptStream* find_accept_stream(int fd) const {
    const auto found = accept_streams_.find(fd);
    return found != accept_streams_.end() ? found->second.get() : nullptr;
  }

  AcceptStream& accept_stream(int fd) {
    std::unique_ptr<AcceptStream>& slot = accept_streams_[fd];
    if (!slot) {
      slot = std::make_unique<AcceptStream>();
      slot->listener = fd;
    }
    return *slot;
  }

  void arm_accept(AcceptStream& stream) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_multishot_accept(sqe, stream.listener, nullptr, nullptr,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(&stream) | kAcceptStreamBit);
    stream.armed = true;
  }

  // Wakes the fibers waiting on a closed listener and frees its stream once the kernel is done
  // with it (its last completion), closing connections it accepted that nobody took.
  void retire(std::unique_ptr<AcceptStream> stream) {
    stream->closed = true;
    tern::detail::WaitList claimed;
    tern::detail::claim_all(stream->waiters, claimed);
    tern::detail::wake_all(claimed, true);
    for (int accepted : stream->ready)
      if (accepted >= 0) tern::detail::sys.close(accepted);
    stream->ready.clear();
    if (stream->armed) retiring_.push_back(std::move(stream));
  }

  void on_accept(AcceptStream* stream, const io_uring_cqe* cqe) {
    const bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    if (!more) stream->armed = false;
    if (stream->closed) {
      if (cqe->res >= 0) tern::detail::sys.close(cqe->res);
      if (!more) std::erase_if(retiring_, [stream](const auto& s) { return s.get() == stream; });
      return;
    }
    if (cqe->res == -EINVAL && !more) {
      multishot_accept_ = false;  // an older kernel: fall back to one accept per call
    } else if (cqe->res != -ECANCELED) {
      stream->ready.push_back(cqe->res);
    }
    if (tern::detail::Waiter* waiter = tern::detail::claim_first(stream->waiters))
      tern::detail::wake(*waiter);
  }

  // A shared-stack fiber's buffers, iovecs and addresses may be on the shared stack, whose bytes
  // move while it is parked: the kernel must not hold them across a park. Such a fiber calls the
  // non-blocking system call itself and waits for readiness (a poll that holds no pointer) when
  // it would block.
  // `limit` is fixed (an idle timeout's deadline computed) at the first wait only.
  template <typename Call>
  Result<std::size_t> by_readiness(int fd, bool writable, WaitLimit limit, Call call) {
    for (;;) {
      const ssize_t n = call();
      if (n >= 0) return static_cast<std::size_t>(n);
      const int err = errno;
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK) return fail(errno_code(err));
      if (Result<void> ready = wait_ready(fd, writable, limit.fix()); !ready)
        return fail(ready.error());
    }
  }

  // Runs one operation; on EAGAIN (a non-blocking fd the kernel did not poll for us) waits for
  // readiness and submits it again. The first wait fixes `limit` for the later ones. Only for a
  // fiber that parks on its own stack (its callers asked parks_off_stack() already).
  template <typename Prep>
  Result<std::size_t> bytes(int fd, bool writable, WaitLimit& limit, Prep prep,
                            unsigned* cqe_flags = nullptr) {
    for (;;) {
      Result<int> done = run(limit, prep, cqe_flags, /*off_stack=*/false);
      if (done) return static_cast<std::size_t>(*done);
      if (done.error() != std::errc::resource_unavailable_try_again) return fail(done.error());
      if (Result<void> ready = wait_ready(fd, writable, limit.fix()); !ready)
        return fail(ready.error());
    }
  }

  // Submits the operation prep() describes and parks until its completion or `limit` (which
  // the wait fixes). On a deadline or an interrupt it cancels the operation and still waits for
  // its completion, since the kernel may be using the caller's buffers until then. `off_stack`:
  // whether the fiber parks off its stack (the operation then lives on the heap).
  template <typename Prep>
  Result<int> run(WaitLimit& limit, Prep prep, unsigned* cqe_flags = nullptr,
                  bool off_stack = tern::detail::parks_off_stack()) {
    const tern::detail::ParkedNode<UringOp> node(off_stack);
    UringOp& op = *node;
    op.waiter.fiber = tern::detail::current_fiber("tern::io");
    io_uring_sqe* sqe = next_sqe();
    prep(sqe);
    io_uring_sqe_set_data(sqe, &op);
    tern::detail::begin_wait(op.waiter.fiber);
    const std::error_code woken = tern::detail::wait(op.waiter.fiber, limit, true);
    if (!op.done) {
      io_uring_sqe* cancel = next_sqe();
      io_uring_prep_cancel(cancel, &op, 0);
      io_uring_sqe_set_data64(cancel, kIgnoredTag);
      tern::detail::begin_wait(op.waiter.fiber);
      tern::detail::wait(op.waiter.fiber, kNoDeadline, false);
    }
    if (op.result == -ECANCELED)
      return fail(woken ? woken : std::make_error_code(std::errc::operation_canceled));
    // An interrupt ended the wait but the operation finished first: report what it did, and
    // keep the interrupt for the fiber's next wait instead of losing it.
    // (A wake leaves `woken` empty: no comparison through the error category then.)
    if (woken && woken == std::errc::operation_canceled)
      tern::detail::keep_interrupt(op.waiter.fiber);
    if (cqe_flags != nullptr) *cqe_flags = op.flags;
    if (op.result >= 0) return op.result;
    return fail(errno_code(-op.result));
  }

  io_uring_sqe* next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // the submission queue is full: flush it
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void arm_wake() {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_multishot(sqe, wake_, POLLIN);
    io_uring_sqe_set_data64(sqe, kWakeTag);
    wake_armed_ = true;
  }

  // Handles the completions that have arrived (timed as the profiler's handle phase).
  void reap() {
    if (io_uring_cq_ready(&ring_) == 0) return;
    prof::timed_phase(prof::LoopProfiler::current(), prof::LoopPhase::handle,
                      [this] { reap_ready(); });
  }

  void reap_ready() {
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      const std::uint64_t tag = io_uring_cqe_get_data64(cqe);
      if (tag == kIgnoredTag) continue;
      if (tag == kWakeTag) {
        std::uint64_t value;
        [[maybe_unused]] ssize_t n = tern::detail::sys.read(wake_, &value, sizeof value);
        if ((cqe->flags & IORING_CQE_F_MORE) == 0) wake_armed_ = false;
        continue;
      }
      if ((tag & kAcceptStreamBit) != 0) {
        on_accept(reinterpret_cast<AcceptStream*>(tag & ~kAcceptStreamBit), cqe);
        continue;
      }
      auto* op = reinterpret_cast<UringOp*>(static_cast<std::uintptr_t>(tag));
      op->result = cqe->res;
      op->flags = cqe->flags;
      op->done = true;
      if (tern::detail::claim(op->waiter)) tern::detail::wake(op->waiter);
    }
    io_uring_cq_advance(&ring_, seen);
  }

  // Whether the last recv on fd emptied its queue (see recv()).
  bool was_drained(int fd) const noexcept {
    return fd >= 0 && static_cast<std::size_t>(fd) < drained_.size() && drained_[fd] == kDrained;
  }
  bool more_queued(int fd) const noexcept override {
    return fd >= 0 && static_cast<std::size_t>(fd) < drained_.size() && drained_[fd] == kMore;
  }
  // What the last recv on fd left: an empty queue, bytes the kernel reported, or not known.
  void note_drained(int fd, bool drained, bool more) {
    if (fd < 0) return;
    const auto index = static_cast<std::size_t>(fd);
    if (index >= drained_.size()) {
      if (!drained && !more) return;
      drained_.resize(index + 1 + index / 2);
    }
    drained_[index] = drained ? kDrained : more ? kMore : 0;
  }
  static constexpr std::uint8_t kDrained = 1;
  static constexpr std::uint8_t kMore = 2;

  io_uring ring_;
  int wake_;
  bool wake_armed_ = false;
  bool poll_first_;                    // the kernel takes IORING_RECVSEND_POLL_FIRST (5.19+)
  std::vector<std::uint8_t> drained_;  // by fd: kDrained, kMore or 0 (see note_drained())
  bool multishot_accept_ = true;
  std::unordered_map<int, std::unique_ptr<AcceptStream>> accept_streams_;
  std::vector<std::unique_ptr<AcceptStream>> retiring_;
};

// Sets up a ring, asking for the cheapest completion mode the kernel offers:
// - deferred task running (6.1+): completions are posted only when this thread asks for events
//   (park() waits with GETEVENTS; poll() enters when IORING_SQ_TASKRUN says work is queued),
//   and a waiting worker is woken once, when the completion it waits for is ready;
// - cooperative task running (5.19+): the kernel does not interrupt the worker to post
//   completions; it raises IORING_SQ_TASKRUN and poll() enters the kernel to collect them;
// - the defaults otherwise.
int init_ring(io_uring* ring) {
  constexpr unsigned kModes[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      0,
  };
  int rc = -EINVAL;
  for (unsigned flags : kModes) {
    io_uring_params params = {};
    params.flags = flags;
    rc = io_uring_queue_init_params(kRingEntries, ring, &params);
    if (rc != -EINVAL) break;
  }
  return rc;
}

}  // namespace

Result<std::unique_ptr<Reactor>> make_uring_reactor() {
  if (Result<void> usable = uring_available(); !usable) return fail(usable.error());
  io_uring ring;
  const int rc = init_ring(&ring);
  if (rc < 0) return fail(errno_code(-rc));
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    io_uring_queue_exit(&ring);
    return fail(errno_code(err));
  }
  return std::unique_ptr<Reactor>(std::make_unique<UringReactor>(ring, wake_fd));
}

Result<void> probe_uring() {
  io_uring ring;
  const int rc = init_ring(&ring);
  if (rc < 0) return fail(errno_code(-rc));
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  bool complete = probe != nullptr;
  for (int op : {IORING_OP_READ, IORING_OP_WRITE, IORING_OP_RECV, IORING_OP_SEND, IORING_OP_RECVMSG,
                 IORING_OP_SENDMSG, IORING_OP_ACCEPT, IORING_OP_CONNECT, IORING_OP_POLL_ADD,
                 IORING_OP_ASYNC_CANCEL}) {
    if (complete && !io_uring_opcode_supported(probe, op)) complete = false;
  }
  if (probe != nullptr) io_uring_free_probe(probe);
  io_uring_queue_exit(&ring);
  if (!complete) return fail(std::errc::not_supported);
  return {};
}

}  // namespace tern::io::detail
