// The child process of signal_test: a TcpServer that logs a numbered line per request to a log
// file, stopped by SIGINT or SIGTERM through tern::io::wait_for_stop_signal.
//
// Usage: signal_child MODE LOG_FILE, where MODE says how the program treats the stop signals:
//   main    block_stop_signals() first thing in main, before the logger and the runtime start;
//   none    nothing but the wait (the straightforward program);
//   thread  as none, with a thread of the program's own started first that leaves them unblocked
//           (a process-directed signal may land there, where tern's handler must catch it).
// Prints "ready PORT" once it waits for the signal, then, after stopping,
// "stopped signal=N requests=R bulk=B final=F dropped=D": it logged "request #1".."request #R"
// (one per request, acknowledged with the number), "bulk #1".."bulk #B" (a fiber logging
// meanwhile) and, after the signal, "final #1".."final #F". Returns 0 from main, whose exit
// writes the log out.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string_view>
#include <thread>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/signal.h"
#include "tern/log/log.h"
#include "tern/net/tcp_server.h"

namespace {

using namespace std::chrono_literals;

constexpr int kFinalLines = 20000;  // more than a ring holds at once: the exit must drain them
constexpr int kBulkBurst = 20;      // bulk lines per millisecond

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: signal_child main|none|thread LOG_FILE\n");
    return 2;
  }
  const std::string_view mode = argv[1];
  if (mode == "main") tern::io::block_stop_signals();
  if (mode == "thread") {
    std::thread([] {
      sigset_t none;
      ::sigemptyset(&none);
      ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
      for (;;) ::pause();  // returns after each handler that runs here
    }).detach();
  }
  if (tern::Result<void> logging = tern::log::init({.file = {.path = argv[2]}}); !logging) {
    std::fprintf(stderr, "signal_child: log: %s\n", logging.error().message().c_str());
    return 2;
  }

  std::atomic<std::uint64_t> requests{0};
  std::atomic<bool> stopping{false};
  tern::Runtime runtime({.workers = 2});
  return runtime.run([&]() -> int {
    tern::net::TcpServer server({}, [&](tern::net::TcpStream& stream) {
      std::uint64_t value = 0;
      for (;;) {
        if (!stream.read_exact(std::as_writable_bytes(std::span(&value, 1)))) return;
        if (stopping.load()) return;
        value = requests.fetch_add(1) + 1;
        TERN_LOG_INFO("request #{}", value);
        if (!stream.write_all(std::as_bytes(std::span(&value, 1)))) return;
      }
    });
    const tern::Result<tern::net::Address> bound = server.start(tern::net::Address::loopback(0));
    if (!bound) {
      std::fprintf(stderr, "signal_child: listen: %s\n", bound.error().message().c_str());
      return 3;
    }
    std::uint64_t bulk = 0;
    tern::Fiber bulk_logger = tern::spawn([&] {
      while (!stopping.load()) {
        for (int i = 0; i < kBulkBurst; ++i) TERN_LOG_INFO("bulk #{}", ++bulk);
        if (!tern::this_fiber::sleep_for(1ms)) break;
      }
    });
    // Runs once this fiber waits, and so once the wait has taken over the stop signals.
    tern::spawn([port = bound->port()] {
      std::printf("ready %u\n", static_cast<unsigned>(port));
      std::fflush(stdout);
    }).detach();
    const tern::Result<int> signal = tern::io::wait_for_stop_signal(tern::deadline_after(120s));
    if (!signal) {
      std::fprintf(stderr, "signal_child: wait: %s\n", signal.error().message().c_str());
      stopping.store(true);
      server.stop(tern::deadline_after(0s));
      bulk_logger.join();
      return 4;
    }
    TERN_LOG_INFO("stopping on signal {}", *signal);
    stopping.store(true);
    server.stop(tern::deadline_after(10s));
    bulk_logger.join();
    for (int i = 1; i <= kFinalLines; ++i) TERN_LOG_INFO("final #{}", i);
    std::printf("stopped signal=%d requests=%llu bulk=%llu final=%d dropped=%llu\n", *signal,
                static_cast<unsigned long long>(requests.load()),
                static_cast<unsigned long long>(bulk), kFinalLines,
                static_cast<unsigned long long>(tern::log::dropped()));
    std::fflush(stdout);
    return 0;
  });  // main returns: exit runs tern::log::shutdown, which writes out every ring
}
