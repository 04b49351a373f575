// Fibers that each hold their own synchronous hiredis connection. Linked with tern::hook, every
// blocking call hiredis makes parks its fiber instead of the worker (docs/hooks.md).
// Start a redis-server, then: example_redis_hooked [port]   (default 6379)
#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 6379;
  tern::Runtime runtime;
  return runtime.run([port] {
    constexpr int kClients = 100;
    std::atomic<int> failed{0};
    std::vector<tern::Fiber> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.push_back(tern::spawn([i, port, &failed] {
        redisContext* c = redisConnect("127.0.0.1", port);
        if (c == nullptr || c->err != 0) {
          std::fprintf(stderr, "client %d: %s\n", i, c != nullptr ? c->errstr : "out of memory");
          ++failed;
          redisFree(c);
          return;
        }
        const std::string key = "hooked:" + std::to_string(i);
        auto* set = static_cast<redisReply*>(redisCommand(c, "SET %s %d", key.c_str(), i));
        auto* get = static_cast<redisReply*>(redisCommand(c, "GET %s", key.c_str()));
        if (get == nullptr || get->type != REDIS_REPLY_STRING || std::atoi(get->str) != i) ++failed;
        freeReplyObject(set);
        freeReplyObject(get);
        redisFree(c);
      }));
    }
    for (tern::Fiber& client : clients) client.join();
    std::printf("%d clients, %d failed\n", kClients, failed.load());
    return failed.load() == 0 ? 0 : 1;
  });
}
