// redis_bench: SET and GET of 64-byte values against a redis-server through hiredis's
// synchronous client, one connection per client, no pipelining; the clients are tern fibers
// (blocking calls parked by tern::hook) or, with --threads, one thread per connection. Prints
// one line: mode, clients, requests, requests/s, p50 and p99 per request in microseconds.
//
//   redis_bench --port P [--clients C] [--requests N] [--threads] [--workers W]
//
// N requests in all (half SET, half GET, unique keys per client), as `redis-benchmark -c C -n N
// -t get,set -d 64` makes N of each. Every reply is checked; a wrong one ends the run with exit 1.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 6379;
  int clients = 50;
  long requests = 100'000;
  bool threads = false;
  std::size_t workers = 0;  // 0: tern's default (one per CPU)
};

// One client's run: requests/2 SET+GET pairs; the latency of each request in ns appended to
// `latencies`. False if a reply was wrong.
bool run_client(const Options& options, int id, long pairs, std::vector<std::int64_t>& latencies) {
  redisContext* c = redisConnect("127.0.0.1", options.port);
  if (c == nullptr || c->err != 0) {
    std::fprintf(stderr, "client %d: %s\n", id, c != nullptr ? c->errstr : "out of memory");
    redisFree(c);
    return false;
  }
  const std::string value(64, static_cast<char>('a' + id % 26));
  bool right = true;
  for (long i = 0; i < pairs && right; ++i) {
    const std::string key = "bench:" + std::to_string(id) + ":" + std::to_string(i % 1000);
    auto start = Clock::now();
    auto* set = static_cast<redisReply*>(
        redisCommand(c, "SET %s %b", key.c_str(), value.data(), value.size()));
    auto end = Clock::now();
    latencies.push_back((end - start).count());
    right = set != nullptr && set->type == REDIS_REPLY_STATUS;
    freeReplyObject(set);
    start = end;
    auto* get = static_cast<redisReply*>(redisCommand(c, "GET %s", key.c_str()));
    latencies.push_back((Clock::now() - start).count());
    right = right && get != nullptr && get->type == REDIS_REPLY_STRING &&
            std::string(get->str, get->len) == value;
    freeReplyObject(get);
  }
  redisFree(c);
  return right;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--threads") {
      options.threads = true;
    } else if (next != nullptr && arg == "--port") {
      options.port = std::atoi(argv[++i]);
    } else if (next != nullptr && arg == "--clients") {
      options.clients = std::atoi(argv[++i]);
    } else if (next != nullptr && arg == "--requests") {
      options.requests = std::atol(argv[++i]);
    } else if (next != nullptr && arg == "--workers") {
      options.workers = static_cast<std::size_t>(std::atol(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: redis_bench --port P [--clients C] [--requests N] [--threads] "
                   "[--workers W]\n");
      std::exit(2);
    }
  }
  if (options.clients < 1 || options.requests < 2 * options.clients) {
    std::fprintf(stderr, "redis_bench: need at least 1 client and 2 requests per client\n");
    std::exit(2);
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const long pairs = options.requests / 2 / options.clients;
  std::vector<std::vector<std::int64_t>> latencies(static_cast<std::size_t>(options.clients));
  std::atomic<int> wrong{0};
  const auto start = Clock::now();
  if (options.threads) {
    std::vector<std::thread> threads;
    for (int id = 0; id < options.clients; ++id) {
      threads.emplace_back([&, id] {
        if (!run_client(options, id, pairs, latencies[static_cast<std::size_t>(id)])) ++wrong;
      });
    }
    for (std::thread& thread : threads) thread.join();
  } else {
    tern::RuntimeOptions runtime_options;
    if (options.workers > 0) runtime_options.workers = options.workers;
    tern::Runtime runtime(runtime_options);
    runtime.run([&] {
      tern::WaitGroup done;
      done.add(static_cast<std::size_t>(options.clients));
      for (int id = 0; id < options.clients; ++id) {
        const auto worker = static_cast<std::size_t>(id) % tern::this_worker::count();
        if (!tern::post(worker, [&, id] {
              if (!run_client(options, id, pairs, latencies[static_cast<std::size_t>(id)])) ++wrong;
              done.done();
            })) {
          ++wrong;
          done.done();
        }
      }
      while (!done.wait()) {
      }
    });
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<std::int64_t> all;
  for (const auto& client : latencies) all.insert(all.end(), client.begin(), client.end());
  if (wrong.load() != 0 || all.empty()) {
    std::fprintf(stderr, "redis_bench: %d clients failed\n", wrong.load());
    return 1;
  }
  std::sort(all.begin(), all.end());
  const auto at = [&](double q) {
    return static_cast<double>(
               all[static_cast<std::size_t>(q * static_cast<double>(all.size() - 1))]) /
           1000.0;
  };
  std::printf("%s clients=%d requests=%zu rps=%.0f p50_us=%.1f p99_us=%.1f\n",
              options.threads ? "threads" : "fibers", options.clients, all.size(),
              static_cast<double>(all.size()) / seconds, at(0.50), at(0.99));
  return 0;
}
