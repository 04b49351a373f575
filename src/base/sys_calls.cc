// The table tern's own code calls libc through (tern/base/detail/sys_calls.h). Its starting
// values are constant, so it holds them before any code runs. In a program that links
// tern::hook, `&::read` here names the hook's replacement (the executable defines `read`), and
// the hook overwrites every entry with its originals before any static constructor of tern runs.
#include "tern/base/detail/sys_calls.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace tern::detail {

constinit SysCalls sys = {
    .socket = &::socket,
    .connect = &::connect,
    .accept = &::accept,
    .accept4 = &::accept4,
    .read = &::read,
    .write = &::write,
    .readv = &::readv,
    .writev = &::writev,
    .recv = &::recv,
    .recvfrom = &::recvfrom,
    .recvmsg = &::recvmsg,
    .send = &::send,
    .sendto = &::sendto,
    .sendmsg = &::sendmsg,
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

void sleep_thread(std::int64_t ns) noexcept {
  timespec left = {.tv_sec = static_cast<time_t>(ns / 1'000'000'000),
                   .tv_nsec = static_cast<long>(ns % 1'000'000'000)};
  while (sys.nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

}  // namespace tern::detail
