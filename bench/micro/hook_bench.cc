// What tern::hook adds to a read(2) of a socket that has data ready: libc's read called
// directly (found with dlsym, as the hook finds it) against the replaced read, on a plain thread
// (pass-through) and in a fiber on a worker (the cooperative path, which tries the call first
// and never waits here). The socket is a loopback TCP connection made through the hooked calls
// and kept full: each iteration reads one byte, and the writer side refills it every 32 KiB,
// the same in every variant. Every benchmark checks that each read returned its byte.

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "tern/fiber/runtime.h"

namespace {

using ReadFn = ssize_t (*)(int, void*, std::size_t);

constexpr std::size_t kRefill = 32 * 1024;

// A connected loopback TCP pair, blocking as the program sees it.
struct Connection {
  int reader = -1;
  int writer = -1;
  Connection() {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listener, 1);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    writer = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(writer, reinterpret_cast<sockaddr*>(&address), sizeof address);
    reader = ::accept(listener, nullptr, nullptr);
    ::close(listener);
  }
  ~Connection() {
    ::close(reader);
    ::close(writer);
  }
};

// The timed loop: one byte per read; `read` is libc's or the replaced one.
void read_loop(benchmark::State& state, ReadFn read) {
  Connection connection;
  const std::vector<char> block(kRefill, 'x');
  std::size_t left = 0;
  std::uint64_t right = 0;
  char byte = 0;
  for (auto _ : state) {
    if (left == 0) {
      left = static_cast<std::size_t>(::write(connection.writer, block.data(), block.size()));
    }
    right += read(connection.reader, &byte, 1) == 1 ? 1 : 0;
    --left;
  }
  if (right != static_cast<std::uint64_t>(state.iterations())) state.SkipWithError("a read failed");
}

ReadFn libc_read() { return reinterpret_cast<ReadFn>(::dlsym(RTLD_NEXT, "read")); }

void BM_ReadLibcDirect(benchmark::State& state) { read_loop(state, libc_read()); }
BENCHMARK(BM_ReadLibcDirect);

void BM_ReadHookedPlainThread(benchmark::State& state) { read_loop(state, &::read); }
BENCHMARK(BM_ReadHookedPlainThread);

void BM_ReadLibcDirectInFiber(benchmark::State& state) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] { read_loop(state, libc_read()); });
}
BENCHMARK(BM_ReadLibcDirectInFiber);

void BM_ReadHookedInFiber(benchmark::State& state) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] { read_loop(state, &::read); });
}
BENCHMARK(BM_ReadHookedInFiber);

}  // namespace
