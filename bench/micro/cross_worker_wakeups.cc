// Channel round trips between a fiber on worker 0 and one on worker 1, the work of fiber_bench's
// cross-worker benchmark with a fixed count, for counting the wake-ups behind it:
//
//   perf stat -e syscalls:sys_enter_futex -e context-switches
//       build/release/bench/micro/cross_worker_wakeups 20000   (one command line)
//
// run with two counts and divide the difference by the difference in round trips.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tern/fiber/channel.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0 || std::atol(argv[1]) <= 0) {
    std::fprintf(stderr,
                 "usage: cross_worker_wakeups ROUND_TRIPS\n"
                 "Sends ROUND_TRIPS values from a fiber on worker 0 to one on worker 1 and back\n"
                 "through two Channel<long>(1), on the fiber layer's own (futex) parker.\n");
    return argc == 2 && std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  const long round_trips = std::atol(argv[1]);
  tern::Channel<long> ping{1};
  tern::Channel<long> pong{1};
  long echoed = 0;
  long wrong = 0;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 2});
  runtime.run([&] {
    tern::WaitGroup echo_done;
    echo_done.add();
    const tern::Result<void> posted = tern::post(1, [&] {
      while (tern::Result<long> value = ping.recv()) {
        ++echoed;
        if (!pong.send(*value + 1)) break;
      }
      echo_done.done();
    });
    if (!posted) std::abort();
    for (long i = 0; i < round_trips; ++i) {
      if (!ping.send(i)) std::abort();
      tern::Result<long> reply = pong.recv();
      if (!reply || *reply != i + 1) ++wrong;
    }
    ping.close();
    (void)echo_done.wait();
  });
  std::printf("%ld round trips, %ld echoed, %ld wrong replies\n", round_trips, echoed, wrong);
  return echoed == round_trips && wrong == 0 ? 0 : 1;
}
