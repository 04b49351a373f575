// redis_bench: SET and GET of 64-byte values against a redis-server through hiredis's
// synchronous client, one connection per client, no pipelining; the clients are tern fibers
// (blocking calls parked by tern::hook) or, with --threads, one thread per connection. Prints
// one line: mode, clients, requests, requests/s, p50 and p99 per request in microseconds (with
// --json, one JSON object in tern-bench's shape, for bench/suite's hooks table).
//
//   redis_bench --port P [--clients C] [--requests N] [--threads] [--workers W] [--json]
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
  bool json = false;
  std::size_t workers = 0;  // 0: tern's default (one per CPU)
};

// The latency of each request of one client in ns, by command.
struct Latencies {
  std::vector<std::int64_t> set;
  std::vector<std::int64_t> get;
};

// One client's run: `pairs` SET+GET pairs, each request's latency recorded. False if a reply was
// wrong or the connection failed.
bool run_client(const Options& options, int id, long pairs, Latencies& latencies) {
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
    latencies.set.push_back((end - start).count());
    right = set != nullptr && set->type == REDIS_REPLY_STATUS;
    freeReplyObject(set);
    start = end;
    auto* get = static_cast<redisReply*>(redisCommand(c, "GET %s", key.c_str()));
    latencies.get.push_back((Clock::now() - start).count());
    right = right && get != nullptr && get->type == REDIS_REPLY_STRING &&
            std::string(get->str, get->len) == value;
    freeReplyObject(get);
  }
  redisFree(c);
  return right;
}

constexpr const char* kUsage =
    "usage: redis_bench --port P [--clients C] [--requests N] [--threads] [--workers W] [--json]\n"
    "  --port P       redis-server on 127.0.0.1:P (default 6379)\n"
    "  --clients C    connections, each its own client (default 50)\n"
    "  --requests N   requests in all, half SET and half GET of 64-byte values (default 100000)\n"
    "  --threads      a thread per connection instead of tern fibers through tern::hook\n"
    "  --workers W    tern workers (default: one per CPU)\n"
    "  --json         one JSON object in tern-bench's shape instead of the text line\n";

// The q-quantile of sorted `values`, in microseconds.
double quantile_us(const std::vector<std::int64_t>& values, double q) {
  const auto index = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1));
  return static_cast<double>(values[index]) / 1000.0;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--threads") {
      options.threads = true;
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else if (next != nullptr && arg == "--port") {
      options.port = std::atoi(argv[++i]);
    } else if (next != nullptr && arg == "--clients") {
      options.clients = std::atoi(argv[++i]);
    } else if (next != nullptr && arg == "--requests") {
      options.requests = std::atol(argv[++i]);
    } else if (next != nullptr && arg == "--workers") {
      options.workers = static_cast<std::size_t>(std::atol(argv[++i]));
    } else {
      std::fprintf(stderr, "redis_bench: unknown or incomplete option %s\n%s", arg.c_str(), kUsage);
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
  std::vector<Latencies> latencies(static_cast<std::size_t>(options.clients));
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
  std::vector<std::int64_t> sets;
  std::vector<std::int64_t> gets;
  for (const Latencies& client : latencies) {
    sets.insert(sets.end(), client.set.begin(), client.set.end());
    gets.insert(gets.end(), client.get.begin(), client.get.end());
  }
  if (wrong.load() != 0 || sets.empty() || gets.empty()) {
    std::fprintf(stderr, "redis_bench: %d clients failed\n", wrong.load());
    return 1;
  }
  std::vector<std::int64_t> all = sets;
  all.insert(all.end(), gets.begin(), gets.end());
  for (auto* values : {&sets, &gets, &all}) std::sort(values->begin(), values->end());
  const char* model = options.threads ? "threads" : "fibers";
  const double rps = static_cast<double>(all.size()) / seconds;
  if (options.json) {
    std::printf(
        "{\"tool\":\"redis_bench\",\"mode\":\"redis\",\"target\":\"redis_bench %s\","
        "\"verified\":true,\"params\":{\"model\":\"%s\",\"clients\":%d,\"requests\":%zu,"
        "\"value_bytes\":64,\"workers\":%zu},\"figures\":{\"seconds\":%.4f,\"rps\":%.1f,"
        "\"p50_us\":%.1f,\"p99_us\":%.1f,\"set_p50_us\":%.1f,\"set_p99_us\":%.1f,"
        "\"get_p50_us\":%.1f,\"get_p99_us\":%.1f}}\n",
        model, model, options.clients, all.size(), options.workers, seconds, rps,
        quantile_us(all, 0.50), quantile_us(all, 0.99), quantile_us(sets, 0.50),
        quantile_us(sets, 0.99), quantile_us(gets, 0.50), quantile_us(gets, 0.99));
  } else {
    std::printf("%s clients=%d requests=%zu rps=%.0f p50_us=%.1f p99_us=%.1f\n", model,
                options.clients, all.size(), rps, quantile_us(all, 0.50), quantile_us(all, 0.99));
  }
  return 0;
}
