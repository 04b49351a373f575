// A test helper process: opens N connections to an echo server, waits until all are open, then
// echoes one message on each. Prints "connected C echoed E" and exits 0 when all N echoed.
// Usage: echo_clients PORT N. Run by tcp_server_test, so that client and server descriptors
// count against two processes' limits.
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tern/fiber/event.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/tcp_stream.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: echo_clients PORT N\n");
    return 2;
  }
  const auto port = static_cast<std::uint16_t>(std::atoi(argv[1]));
  const int count = std::atoi(argv[2]);
  rlimit limit = {};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  std::atomic<int> connected{0};
  std::atomic<int> echoed{0};
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    using namespace std::chrono_literals;
    const tern::net::Address server = tern::net::Address::loopback(port);
    tern::Event all_connected;
    tern::WaitGroup done;
    done.add(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      (void)tern::post(static_cast<std::size_t>(i % 2), [&, i] {
        const tern::Deadline deadline = tern::deadline_after(120s);
        tern::Result<tern::net::TcpStream> stream = tern::net::TcpStream::connect(server, deadline);
        if (!stream) {
          std::fprintf(stderr, "echo_clients: connect %d: %s\n", i,
                       stream.error().message().c_str());
          all_connected.set();
        } else {
          if (++connected == count) all_connected.set();
          if (all_connected.wait_until(deadline)) {
            const std::string message = "#" + std::to_string(i);
            std::string reply(message.size(), '\0');
            if (stream->write_all(std::as_bytes(std::span(message)), deadline) &&
                stream->read_exact(std::as_writable_bytes(std::span(reply)), deadline) &&
                reply == message)
              echoed++;
          }
        }
        done.done();
      });
    }
    (void)done.wait_for(180s);
  });
  std::printf("connected %d echoed %d\n", connected.load(), echoed.load());
  return connected.load() == count && echoed.load() == count ? 0 : 1;
}
