// Two producer fibers on two workers feed a channel; the first fiber sums what arrives.
#include <tern/fiber/channel.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/wait_group.h>

#include <cstdio>

int main() {
  tern::Runtime runtime({.workers = 2});
  long sum = runtime.run([] {
    tern::Channel<int> numbers(64);
    tern::WaitGroup producers;
    producers.add(2);
    for (std::size_t worker : {0, 1}) {
      (void)tern::post(worker, [&] {
        for (int i = 1; i <= 1000; ++i) (void)numbers.send(i);  // parks while full
        producers.done();
      });
    }
    (void)tern::post(0, [&] {
      (void)producers.wait();
      numbers.close();
    });
    long total = 0;
    for (int n : numbers) total += n;  // receives until closed and drained
    return total;
  });
  std::printf("sum = %ld\n", sum);
  return sum == 2 * 500500 ? 0 : 1;
}
