#include "tern/net/socket.h"

#include <sys/socket.h>

#include <cerrno>

#include "tern/base/detail/sys_calls.h"
#include "tern/io/io.h"

namespace tern::net {

namespace {
std::error_code last_error() { return {errno, std::system_category()}; }
}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Result<Socket> Socket::open(int family, int type, int protocol) {
  const int fd = tern::detail::sys.socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
  if (fd < 0) return fail(last_error());
  return Socket(fd);
}

void Socket::close() noexcept {
  if (fd_ >= 0) io::close(std::exchange(fd_, -1));
}

Result<Address> Socket::local_address() const {
  Address address;
  socklen_t length = Address::capacity();
  if (::getsockname(fd_, address.data(), &length) != 0) return fail(last_error());
  address.set_length(length);
  return address;
}

Result<Address> Socket::peer_address() const {
  Address address;
  socklen_t length = Address::capacity();
  if (::getpeername(fd_, address.data(), &length) != 0) return fail(last_error());
  address.set_length(length);
  return address;
}

Result<void> Socket::set_option(int level, int name, int value) {
  if (tern::detail::sys.setsockopt(fd_, level, name, &value, sizeof value) != 0)
    return fail(last_error());
  return {};
}

Result<int> Socket::get_option(int level, int name) const {
  int value = 0;
  socklen_t length = sizeof value;
  if (::getsockopt(fd_, level, name, &value, &length) != 0) return fail(last_error());
  return value;
}

}  // namespace tern::net
