// An echo server: a fiber per connection, one reactor per core. Usage: echo_server [port]
#include <tern/fiber/runtime.h>
#include <tern/io/signal.h>
#include <tern/net/tcp_server.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 7000);
  tern::Runtime runtime;
  return runtime.run([port] {
    tern::net::TcpServer server({}, [](tern::net::TcpStream& stream) {
      std::vector<std::byte> buf(16 * 1024);
      for (;;) {
        tern::Result<std::size_t> n = stream.read(buf);  // parks this fiber only
        if (!n || *n == 0) return;                       // error or peer closed
        if (!stream.write_all(std::span(buf).first(*n))) return;
      }
    });
    tern::Result<tern::net::Address> bound = server.start(tern::net::Address::loopback(port));
    if (!bound) {
      std::fprintf(stderr, "listen: %s\n", bound.error().message().c_str());
      return 1;
    }
    std::printf("echoing on %s; Ctrl-C to stop\n", bound->to_string().c_str());
    std::fflush(stdout);
    tern::Result<int> signal = tern::io::wait_for_stop_signal();  // SIGINT or SIGTERM
    server.stop(tern::deadline_after(std::chrono::seconds(1)));   // lets connections finish
    std::printf("stopped by signal %d\n", signal.value_or(0));
    return 0;
  });
}
