// The epoll backend: edge-triggered registration once per fd; an operation tries its system
// call first and waits for readiness only on EAGAIN.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

#include "reactor.h"
#include "tern/base/assert.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/fiber/detail/parked_node.h"
#include "tern/fiber/detail/waiter.h"
#include "tern/fiber/fiber.h"
#include "tern/prof/loop_profiler.h"

namespace tern::io::detail {

namespace {

using tern::detail::Waiter;
using tern::detail::WaitList;

constexpr int kMaxEvents = 256;

// A recv parked for readiness that the reactor performs itself when the edge arrives, so the
// receives of one epoll_wait run back to back in the loop (as io_uring completes them in one
// io_uring_enter) instead of one per fiber between its other work. Lives on the parked fiber's
// stack, as does the buffer (never used with stacks that park off their memory).
struct PendingRecv {
  void* buf = nullptr;
  std::size_t len = 0;
  bool done = false;  // the reactor received: result or error holds the outcome
  ssize_t result = 0;
  int error = 0;
  int left = -1;  // bytes the receive left queued (TCP_INQ on), else -1
};

// What the reactor knows about one fd.
struct FdState {
  bool registered = false;
  bool stream_socket = false;  // SOCK_STREAM: a short read means the receive queue was empty
  bool kind_known = false;     // stream_socket and tcp are known (probed, or declared)
  bool tcp = false;            // a TCP socket
  bool inq_tried = false;      // TCP_INQ was asked for (tcp_inq says whether it took)
  bool tcp_inq = false;        // TCP with TCP_INQ on: recvmsg can say what is left queued
  bool filled = false;         // the last recv filled its buffer (so a short read proves nothing)
  bool drained = false;        // the last recv emptied the queue and no edge has arrived since
  bool more = false;           // the last recv left bytes queued (TCP_INQ said so)
  bool irregular = false;      // hang-up, error or urgent data seen: short reads prove nothing
  bool readable = false;       // an edge arrived that no reader has consumed yet
  bool writable = false;
  WaitList readers;
  WaitList writers;
};

class EpollReactor final : public Reactor {
 public:
  EpollReactor(int epoll_fd, int wake_fd)
      : Reactor(Backend::epoll), epoll_(epoll_fd), wake_(wake_fd) {}
  ~EpollReactor() override {
    tern::detail::sys.close(wake_);
    tern::detail::sys.close(epoll_);
  }

  void park(Deadline deadline) override { wait_events(deadline); }
  void poll() override { wait_events(Deadline::min()); }
  void unpark() noexcept override {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = tern::detail::sys.write(wake_, &one, sizeof one);
  }

  Result<std::size_t> read(int fd, void* buf, std::size_t len, WaitLimit limit) override {
    return retry(fd, false, limit, [&] { return tern::detail::sys.read(fd, buf, len); });
  }
  Result<std::size_t> write(int fd, const void* buf, std::size_t len, WaitLimit limit) override {
    return retry(fd, true, limit, [&] { return tern::detail::sys.write(fd, buf, len); });
  }
  Result<std::size_t> recv(int fd, void* buf, std::size_t len, int flags,
                           WaitLimit limit) override {
    FdState* known = registered_state(fd);  // not used past a wait: close may free it
    // Reads that fill their buffer (exact-size reads of a header, a reply, a block) cannot tell
    // an empty queue from a full one. Once a TCP socket's last read was such, the next one asks
    // the kernel how many bytes it left (TCP_INQ, turned on then), so emptying the queue is
    // known there too.
    const bool ask_left = flags == 0 && known != nullptr && known->filled && inq_on(fd, *known);
    int left = -1;
    // After a read that emptied a stream socket's queue, unless an edge has arrived since, the
    // next read would only fail with EAGAIN, so wait for the edge first (this saves a system
    // call per message in request/reply traffic).
    // The wait hands the reactor the buffer: the edge's dispatch receives into it.
    PendingRecv pending{.buf = buf, .len = len};
    if (flags == 0 && known != nullptr && known->stream_socket && known->drained &&
        !known->readable && !known->irregular) {
      const bool on_stack = !tern::detail::parks_off_stack();
      if (Result<void> ready = wait_registered(*known, false, limit, on_stack ? &pending : nullptr);
          !ready)
        return fail(ready.error());
    }
    Result<std::size_t> n =
        pending.done
            ? (pending.result >= 0 ? Result<std::size_t>(static_cast<std::size_t>(pending.result))
                                   : Result<std::size_t>(fail(errno_code(pending.error))))
            : retry(fd, false, limit, [&] {
                return ask_left ? recv_reporting_left(fd, buf, len, left)
                                : tern::detail::sys.recv(fd, buf, len, flags);
              });
    if (pending.done) left = pending.left;
    const bool emptied = recv_emptied_queue(flags, n, len, left == 0);
    FdState* state = registered_state(fd);
    // A first read that emptied an unregistered socket's queue (a fresh connection's first
    // request) registers it now: the next read would otherwise fail with EAGAIN and register
    // then. Registration reports data that came in between, so none is missed.
    if (state == nullptr && emptied && register_fd(fd)) state = registered_state(fd);
    if (state != nullptr) {
      state->drained = emptied && state->stream_socket;
      state->filled = n && *n == len;
      state->more = flags == 0 && left > 0;
    }
    return n;
  }
  Result<std::size_t> send(int fd, const void* buf, std::size_t len, int flags,
                           WaitLimit limit) override {
    return retry(fd, true, limit,
                 [&] { return tern::detail::sys.send(fd, buf, len, flags | MSG_NOSIGNAL); });
  }
  Result<std::size_t> recvmsg(int fd, msghdr* message, int flags, WaitLimit limit) override {
    return retry(fd, false, limit, [&] { return tern::detail::sys.recvmsg(fd, message, flags); });
  }
  Result<std::size_t> sendmsg(int fd, const msghdr* message, int flags, WaitLimit limit) override {
    return retry(fd, true, limit,
                 [&] { return tern::detail::sys.sendmsg(fd, message, flags | MSG_NOSIGNAL); });
  }
  // Pending connections are taken kAcceptBudget in a row before the acceptor yields, rather
  // than within the kBudget every operation shares: during a burst of connects larger than the
  // listen backlog, a worker serving the connections it already took between short runs of
  // accepts lets the backlog fill, and each SYN the kernel then drops costs its client a second.
  Result<int> accept(int fd, sockaddr* peer, socklen_t* length, Deadline deadline) override {
    for (;;) {
      const int accepted =
          tern::detail::sys.accept4(fd, peer, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (accepted >= 0) {
        if (--accept_budget_ == 0) {
          accept_budget_ = kAcceptBudget;
          wait_events(Deadline::min());
          this_fiber::yield();
        }
        return accepted;
      }
      const int err = errno;
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK) return fail(errno_code(err));
      accept_budget_ = kAcceptBudget;
      if (Result<void> ready = wait_ready(fd, false, deadline); !ready) return fail(ready.error());
    }
  }
  Result<void> connect(int fd, const sockaddr* address, socklen_t length,
                       Deadline deadline) override {
    if (tern::detail::sys.connect(fd, address, length) == 0) return {};
    if (errno != EINPROGRESS && errno != EINTR) return fail(errno_code(errno));
    if (Result<void> ready = wait_ready(fd, true, deadline); !ready) return ready;
    return connect_outcome(fd);
  }

  Result<void> wait_ready(int fd, bool writable, Deadline deadline) override {
    WaitLimit limit = deadline;
    return wait_ready(fd, writable, limit, nullptr);
  }

  // wait_ready until `limit`, which a wait fixes (an operation's later waits share its
  // deadline), handing a reader's buffer to the edge's dispatch when `pending` is set.
  Result<void> wait_ready(int fd, bool writable, WaitLimit& limit, PendingRecv* pending) {
    FdState* known = registered_state(fd);  // the common case: no call to register_fd
    if (known == nullptr) {
      if (Result<void> registered = register_fd(fd); !registered) return registered;
      known = states_[fd].get();
    }
    return wait_registered(*known, writable, limit, pending);
  }

  // wait_ready for a registered fd whose state the caller has looked up.
  Result<void> wait_registered(FdState& state, bool writable, WaitLimit& limit,
                               PendingRecv* pending) {
    bool& ready = writable ? state.writable : state.readable;
    if (ready) {  // an edge arrived since the last wait: try the call again first
      ready = false;
      if (!writable) state.drained = false;
      return {};
    }
    budget_ = kBudget;  // this fiber parks: the others run, so none is starving them
    // A pending receive comes only from a fiber on its own stack (recv asked already).
    const tern::detail::ParkedNode<Waiter> node(pending == nullptr &&
                                                tern::detail::parks_off_stack());
    Waiter& waiter = *node;
    waiter.fiber = tern::detail::current_fiber("tern::io");
    waiter.slot = pending;
    tern::detail::begin_wait(waiter.fiber);
    WaitList& queue = writable ? state.writers : state.readers;
    queue.push_back(waiter);
    const std::error_code result = tern::detail::wait(waiter.fiber, limit, true);
    if (!waiter.fired) {
      tern::detail::withdraw(queue, waiter);
      return fail(result);
    }
    // `state` may be gone: the descriptor can be closed between the wake and this fiber's
    // turn. dispatch() has cleared `drained` for the edge that woke it.
    if (waiter.closed) return fail(std::errc::operation_canceled);
    return {};
  }

  Result<void> wait_data(int fd, Deadline deadline) override {
    const FdState* known = registered_state(fd);  // not used past a wait: close may free it
    // An fd this reactor has not registered yet (a fresh connection): registering it reports its
    // present state as an edge, so the wait ends at once if data is there, with no extra check.
    // After a read that emptied a stream socket's queue, only a new edge can bring data.
    if (known == nullptr ||
        (known->stream_socket && known->drained && !known->readable && !known->irregular))
      return settle_timed_out_wait(fd, wait_ready(fd, false, deadline));
    // Otherwise an edge may have come and gone with its data still queued: ask the socket,
    // before and after each wait (an edge can also be one whose data was read since).
    while (!readable_now(fd)) {
      if (Result<void> waited = wait_ready(fd, false, deadline); !waited)
        return settle_timed_out_wait(fd, waited);
    }
    return {};
  }

  void declare_tcp(int fd) noexcept override {
    if (fd < 0) return;
    const auto index = static_cast<std::size_t>(fd);
    if (index >= states_.size()) states_.resize(index + 1 + index / 2);
    if (!states_[index]) states_[index] = std::make_unique<FdState>();
    FdState& state = *states_[index];
    if (state.registered) return;  // already probed
    state.kind_known = true;
    state.tcp = true;
    state.stream_socket = true;
  }

  bool more_queued(int fd) const noexcept override {
    return static_cast<std::size_t>(fd) < states_.size() && states_[fd] && states_[fd]->more;
  }

  void close(int fd) noexcept override {
    if (fd < 0) return;
    if (static_cast<std::size_t>(fd) < states_.size() && states_[fd]) {
      FdState& state = *states_[fd];
      WaitList claimed;
      tern::detail::claim_all(state.readers, claimed);
      tern::detail::claim_all(state.writers, claimed);
      tern::detail::wake_all(claimed, true);
      states_[fd].reset();
    }
    tern::detail::sys.close(fd);
  }

 private:
  // Adds fd to the epoll set (edge-triggered, once) and learns what kind of socket it is.
  Result<void> register_fd(int fd) {
    FdState& state = state_of(fd);
    if (state.registered) return {};
    epoll_event event = {};
    event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
    event.data.fd = fd;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0 && errno != EEXIST)
      return fail(errno_code(errno));
    state.registered = true;
    if (state.kind_known) return {};  // a declared TCP socket: TCP_INQ waits for a full read
    // TCP_INQ is refused by anything but TCP, so turning it on also tells a TCP stream apart in
    // one call; only other descriptors (Unix sockets, pipes) ask for their type.
    state.kind_known = true;
    state.tcp = inq_on(fd, state, true);
    int type = 0;
    socklen_t size = sizeof type;
    state.stream_socket = state.tcp || (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) == 0 &&
                                        type == SOCK_STREAM);
    return {};
  }

  // Whether fd's TCP_INQ is on, turning it on the first time it is needed (`probe`: whatever
  // the socket's kind; else only for a TCP socket).
  static bool inq_on(int fd, FdState& state, bool probe = false) noexcept {
    if (state.inq_tried || (!probe && !state.tcp)) return state.tcp_inq;
    state.inq_tried = true;
    const int on = 1;
    state.tcp_inq = tern::detail::sys.setsockopt(fd, IPPROTO_TCP, TCP_INQ, &on, sizeof on) == 0;
    return state.tcp_inq;
  }

  // Makes the system call, and on EAGAIN waits for readiness and makes it again; `limit` is
  // fixed (an idle timeout's deadline computed) by the first wait only.
  template <typename Call>
  Result<std::size_t> retry(int fd, bool writable, WaitLimit limit, Call call) {
    for (bool waited = false;; waited = true) {
      const ssize_t n = call();
      if (n >= 0) {
        if (!waited) spend_budget();
        return static_cast<std::size_t>(n);
      }
      const int err = errno;
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK) return fail(errno_code(err));
      budget_ = kBudget;
      if (Result<void> ready = wait_ready(fd, writable, limit, nullptr); !ready)
        return fail(ready.error());
    }
  }

  // A fiber whose sockets always have data (pipelined clients) would never park, and the other
  // fibers of this worker would starve: after kBudget operations that completed without a wait,
  // the caller collects the ready events (waking the fibers they concern) and yields behind
  // them (tokio's cooperative budget, for the same reason).
  void spend_budget() noexcept {
    if (--budget_ > 0) return;
    budget_ = kBudget;
    wait_events(Deadline::min());
    this_fiber::yield();
  }

  // recv that also stores in `left` the bytes still queued after it (TCP_INQ's control
  // message), or leaves it alone when the kernel sent none. Out of line, so that the plain
  // receives beside it (request/reply traffic, which never fills a buffer) stay as small.
  [[gnu::noinline]] static ssize_t recv_reporting_left(int fd, void* buf, std::size_t len,
                                                       int& left) noexcept {
    iovec part = {.iov_base = buf, .iov_len = len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr message = {};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = tern::detail::sys.recvmsg(fd, &message, 0);
    if (n < 0) return n;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ)
        std::memcpy(&left, CMSG_DATA(c), sizeof left);
    }
    return n;
  }

  // The state of fd if it is registered with this reactor, else nullptr.
  FdState* registered_state(int fd) noexcept {
    // A negative fd, cast, is past the end too.
    if (static_cast<std::size_t>(fd) >= states_.size() || !states_[fd]) return nullptr;
    return states_[fd]->registered ? states_[fd].get() : nullptr;
  }

  FdState& state_of(int fd) {
    TERN_ASSERT(fd >= 0, "tern::io: negative file descriptor");
    const auto index = static_cast<std::size_t>(fd);
    if (index >= states_.size()) states_.resize(index + 1 + index / 2);
    if (!states_[index]) states_[index] = std::make_unique<FdState>();
    return *states_[index];
  }

  // Also runs on the stack of a fiber that spent its budget: the events go to a member, so
  // that fiber's stack does not grow by the array's 3 KiB (a page more per connection fiber).
  void wait_events(Deadline deadline) {
    epoll_event* events = events_;
    int count;
    if (deadline == Deadline::min()) {
      count = tern::detail::sys.epoll_wait(epoll_, events, kMaxEvents, 0);
    } else if (deadline == kNoDeadline) {
      count = tern::detail::sys.epoll_wait(epoll_, events, kMaxEvents, -1);
    } else {
      auto remaining = deadline - Clock::now();
      if (remaining < Clock::duration::zero()) remaining = Clock::duration::zero();
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(remaining).count();
      count = -1;
      if (pwait2_) {
        timespec timeout = {static_cast<time_t>(ns / 1'000'000'000),
                            static_cast<long>(ns % 1'000'000'000)};
        count = ::epoll_pwait2(epoll_, events, kMaxEvents, &timeout, nullptr);
        // Refused by kernels before 5.11 and by valgrind: a failing wait would make the worker
        // spin until its next timer, so wait in milliseconds from now on.
        if (count < 0 && errno == ENOSYS) pwait2_ = false;
      }
      if (!pwait2_) {
        // Rounded up: the wait never ends before the deadline.
        const auto ms = std::min<std::int64_t>((ns + 999'999) / 1'000'000, INT_MAX);
        count = tern::detail::sys.epoll_wait(epoll_, events, kMaxEvents, static_cast<int>(ms));
      }
    }
    if (count <= 0) return;
    prof::timed_phase(prof::LoopProfiler::current(), prof::LoopPhase::handle, [&] {
      for (int i = 0; i < count; ++i) dispatch(events[i]);
    });
  }

  void dispatch(const epoll_event& event) {
    const int fd = event.data.fd;
    if (fd == wake_) {
      std::uint64_t value;
      [[maybe_unused]] ssize_t n = tern::detail::sys.read(wake_, &value, sizeof value);
      return;
    }
    if (static_cast<std::size_t>(fd) >= states_.size() || !states_[fd]) return;
    FdState& state = *states_[fd];
    if (event.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI)) state.irregular = true;
    if (event.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      state.drained = false;  // an edge arrived: the next recv must try
      if (!wake_readers(fd, state)) state.readable = true;
    }
    if (event.events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) {
      if (!wake_waiters(state.writers)) state.writable = true;
    }
  }

  // wake_waiters for the readers of fd: the first claimed one that parked in recv gets its
  // bytes (or the error) from a receive made here (which also learns what it left queued once
  // TCP_INQ is on); the others try their own calls. The first is woken straight from the queue
  // (mostly the only one: a connection's reader).
  static bool wake_readers(int fd, FdState& state) {
    WaitList& queue = state.readers;
    if (queue.empty()) return false;
    Waiter* first = tern::detail::claim_first(queue);
    if (first != nullptr && first->slot != nullptr) {
      PendingRecv& pending = *static_cast<PendingRecv*>(first->slot);
      ssize_t n;
      do {
        n = state.tcp_inq ? recv_reporting_left(fd, pending.buf, pending.len, pending.left)
                          : tern::detail::sys.recv(fd, pending.buf, pending.len, 0);
      } while (n < 0 && errno == EINTR);
      if (n >= 0) {
        pending.done = true;
        pending.result = n;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        pending.done = true;
        pending.result = -1;
        pending.error = errno;
      }  // nothing there after all (a stale edge): the reader tries once more itself
    }
    if (first != nullptr) tern::detail::wake(*first);
    if (!queue.empty()) wake_waiters(queue);
    return true;
  }

  // Wakes every waiter in queue; returns whether there was one.
  static bool wake_waiters(WaitList& queue) {
    if (queue.empty()) return false;
    WaitList claimed;
    tern::detail::claim_all(queue, claimed);
    tern::detail::wake_all(claimed);
    return true;
  }

  static constexpr int kBudget = 64;
  // Connections accepted in a row before the acceptor yields (see accept): a quarter of the
  // largest listen backlog Linux allows by default (net.core.somaxconn 4096).
  static constexpr int kAcceptBudget = 1024;
  epoll_event events_[kMaxEvents];  // wait_events' results; dispatch never reenters it
  int epoll_;
  int wake_;
  int budget_ = kBudget;
  int accept_budget_ = kAcceptBudget;  // accepts left before the acceptor yields
  bool pwait2_ = true;  // epoll_pwait2 works here (wait_events: else epoll_wait in ms)
  std::vector<std::unique_ptr<FdState>> states_;
};

}  // namespace

Result<std::unique_ptr<Reactor>> make_epoll_reactor() {
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return fail(errno_code(errno));
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    tern::detail::sys.close(epoll_fd);
    return fail(errno_code(err));
  }
  epoll_event event = {};
  event.events = EPOLLIN | EPOLLET;
  event.data.fd = wake_fd;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &event) != 0) {
    const int err = errno;
    tern::detail::sys.close(wake_fd);
    tern::detail::sys.close(epoll_fd);
    return fail(errno_code(err));
  }
  return std::unique_ptr<Reactor>(std::make_unique<EpollReactor>(epoll_fd, wake_fd));
}

}  // namespace tern::io::detail
