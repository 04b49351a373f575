// The reactor base, backend choice (TERN_IO), and the default reactors for every runtime in a
// program that links tern::io.
#include "reactor.h"

#include <poll.h>

#include <cerrno>
#include <mutex>
#include <string>

#include "tern/base/assert.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/log/log.h"

namespace tern::io {

namespace detail {

Result<void> probe_uring();

// A reactor clears itself in its destructor on the worker thread that owns it (worker 0 is the
// thread that called Runtime::run and destroys the schedulers), so the pointer is never stale.
constinit thread_local Reactor* Reactor::current_reactor_ = nullptr;

Reactor::Reactor(Backend backend) noexcept : backend_(backend), previous_(current_reactor_) {
  current_reactor_ = this;
}

Reactor::~Reactor() {
  if (current_reactor_ == this) current_reactor_ = previous_;
}

Result<void> connect_outcome(int fd) noexcept {
  int error = 0;
  socklen_t size = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return fail(errno_code(errno));
  if (error != 0) return fail(errno_code(error));
  return {};
}

bool readable_now(int fd) noexcept {
  for (;;) {
    pollfd state = {fd, POLLIN | POLLRDHUP, 0};
    const int ready = tern::detail::sys.poll(&state, 1, 0);
    if (ready >= 0) return ready > 0;
    if (errno != EINTR) return false;
  }
}

}  // namespace detail

namespace {

std::string describe_uring_failure(std::error_code error) {
  if (error == std::errc::function_not_supported) return "the kernel has no io_uring (ENOSYS)";
  if (error == std::errc::operation_not_permitted)
    return "io_uring is disabled (kernel.io_uring_disabled or a seccomp policy: EPERM)";
  if (error == std::errc::not_supported)
    return "the kernel's io_uring lacks an operation tern needs";
  return "io_uring setup failed: " + error.message();
}

std::unique_ptr<Parker> make_reactor(BackendChoice choice, std::size_t worker) {
  if (choice != BackendChoice::epoll) {
    Result<std::unique_ptr<detail::Reactor>> uring = detail::make_uring_reactor();
    if (uring) return std::move(*uring);
    if (choice == BackendChoice::uring) {
      TERN_LOG_FATAL("the io_uring backend was asked for but {}",
                     describe_uring_failure(uring.error()));
    }
    static std::once_flag logged;
    std::call_once(logged, [&] {
      TERN_LOG_WARN("using epoll because {}", describe_uring_failure(uring.error()));
    });
  }
  Result<std::unique_ptr<detail::Reactor>> epoll = detail::make_epoll_reactor();
  if (!epoll) {
    TERN_LOG_FATAL("cannot create the epoll reactor of worker {}: {}", worker,
                   epoll.error().message());
  }
  return std::move(*epoll);
}

std::unique_ptr<Parker> make_default_reactor(std::size_t worker) {
  static const BackendChoice choice = backend_from_environment();
  return make_reactor(choice, worker);
}

// Every runtime in a program that links tern::io gets reactors without asking.
[[maybe_unused]] const bool registered = [] {
  set_default_parker_factory(&make_default_reactor);
  return true;
}();

}  // namespace

std::string_view to_string(Backend backend) noexcept {
  return backend == Backend::epoll ? "epoll" : "uring";
}

Result<BackendChoice> parse_backend(std::string_view text) noexcept {
  if (text == "epoll") return BackendChoice::epoll;
  if (text == "uring" || text == "io_uring") return BackendChoice::uring;
  if (text == "auto" || text.empty()) return BackendChoice::automatic;
  return fail(std::errc::invalid_argument);
}

BackendChoice backend_from_environment() {
  const char* value = std::getenv("TERN_IO");
  if (value == nullptr) return BackendChoice::automatic;
  Result<BackendChoice> choice = parse_backend(value);
  if (!choice) {
    TERN_FATAL("TERN_IO='{}' is not valid: expected epoll, uring or auto (unset means auto)",
               value);
  }
  return *choice;
}

Result<void> uring_available() {
  static const Result<void> probed = detail::probe_uring();
  return probed;
}

std::function<std::unique_ptr<Parker>(std::size_t)> reactors(BackendChoice choice) {
  return [choice](std::size_t worker) { return make_reactor(choice, worker); };
}

Backend current_backend() {
  detail::Reactor* reactor = detail::Reactor::current();
  if (reactor == nullptr) {
    TERN_FATAL(
        "tern::io::current_backend called outside a worker with a reactor: call it from a fiber "
        "(inside Runtime::run)");
  }
  return reactor->backend();
}

}  // namespace tern::io
