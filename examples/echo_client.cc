// Sends lines to an echo server and checks the replies. Usage: echo_client host:port [count]
#include <tern/fiber/runtime.h>
#include <tern/net/tcp_stream.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: echo_client host:port [count]\n");
    return 2;
  }
  const int count = argc > 2 ? std::atoi(argv[2]) : 10;
  tern::Runtime runtime({.workers = 1});
  return runtime.run([&] {
    auto deadline = tern::deadline_after(std::chrono::seconds(5));
    tern::Result<tern::net::TcpStream> stream = tern::net::TcpStream::connect(argv[1], deadline);
    if (!stream) {
      std::fprintf(stderr, "%s\n", stream.error().message().c_str());  // "connect ADDRESS: why"
      return 1;
    }
    for (int i = 0; i < count; ++i) {
      const std::string line = "line " + std::to_string(i) + "\n";
      std::string reply(line.size(), '\0');
      if (!stream->write_all(std::as_bytes(std::span(line)), deadline) ||
          !stream->read_exact(std::as_writable_bytes(std::span(reply)), deadline) ||
          reply != line) {
        std::fprintf(stderr, "echo %d failed\n", i);
        return 1;
      }
    }
    std::printf("%d lines echoed\n", count);
    return 0;
  });
}
