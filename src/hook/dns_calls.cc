// The hooked name lookups: in a fiber they run on tern's offload pool (glibc's resolver calls
// its own socket functions, which no hook can reach) while the fiber is parked; elsewhere
// libc's. errno and h_errno are carried back from the pool's thread.
#include <netdb.h>

#include <cerrno>

#include "originals.h"
#include "tern/io/offload.h"
#include "tern/io/poll.h"

using namespace tern::hook::detail;

extern "C" {

// Named by tern::hook's link options (-u) so that the linker takes this object whole, even when
// another library (a sanitizer's runtime) already defines the names it replaces.
extern const char tern_hook_dns_calls;
const char tern_hook_dns_calls = 0;

int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** result) {
  const Originals& libc = originals();
  if (!tern::io::on_reactor_worker()) return libc.getaddrinfo(node, service, hints, result);
  int error = 0;
  const int rc = tern::io::offload([&] {
    const int found = libc.getaddrinfo(node, service, hints, result);
    error = errno;
    return found;
  });
  errno = error;
  return rc;
}

hostent* gethostbyname(const char* name) {
  const Originals& libc = originals();
  if (!tern::io::on_reactor_worker()) return libc.gethostbyname(name);
  int error = 0;
  int host_error = 0;
  hostent* found = tern::io::offload([&] {
    hostent* host = libc.gethostbyname(name);
    error = errno;
    host_error = h_errno;
    return host;
  });
  errno = error;
  h_errno = host_error;
  return found;
}

int gethostbyname_r(const char* name, hostent* host, char* buffer, size_t length, hostent** result,
                    int* host_error) {
  const Originals& libc = originals();
  if (!tern::io::on_reactor_worker())
    return libc.gethostbyname_r(name, host, buffer, length, result, host_error);
  int error = 0;
  const int rc = tern::io::offload([&] {
    const int found = libc.gethostbyname_r(name, host, buffer, length, result, host_error);
    error = errno;
    return found;
  });
  errno = error;
  return rc;
}

}  // extern "C"
