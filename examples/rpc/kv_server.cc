// A key-value store served over tern::rpc (the KeyValue service of kv.proto) until SIGINT or
// SIGTERM. Usage: kv_server [--listen host:port] [--token secret]
// Listens on 127.0.0.1:7100 by default (port 0: the kernel picks one) and prints
// "kv_server: serving on <address>" once it does. With --token, every call must carry the metadata
// "authorization: Bearer <secret>".
#include <tern/fiber/mutex.h>
#include <tern/fiber/runtime.h>
#include <tern/io/signal.h>
#include <tern/rpc/server.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv.tern.h"  // generated from kv.proto by tern_add_proto

namespace {

// The service: a map from key to value. Calls run in fibers on every worker, so a tern::Mutex
// (which parks a waiting fiber, not its thread) guards the map.
class KeyValue final : public kv::KeyValueBase {
 public:
  tern::rpc::Status Get(tern::rpc::ServerContext&, const kv::GetRequest& request,
                        kv::GetReply& reply) override {
    std::lock_guard lock(mutex_);
    auto found = values_.find(request.key());
    if (found == values_.end()) {
      return {tern::rpc::StatusCode::not_found, "no value for '" + request.key() + "'"};
    }
    reply.set_value(found->second);
    return {};  // ok: the client gets the reply
  }

  tern::rpc::Status Put(tern::rpc::ServerContext&, const kv::PutRequest& request,
                        kv::PutReply& reply) override {
    std::lock_guard lock(mutex_);
    const bool inserted = values_.insert_or_assign(request.key(), request.value()).second;
    reply.set_replaced(!inserted);
    return {};
  }

  tern::rpc::Status Delete(tern::rpc::ServerContext&, const kv::DeleteRequest& request,
                           kv::DeleteReply& reply) override {
    std::lock_guard lock(mutex_);
    reply.set_existed(values_.erase(request.key()) > 0);
    return {};
  }

  tern::rpc::Status List(tern::rpc::ServerContext&, const kv::ListRequest& request,
                         kv::ListReply& reply) override {
    std::lock_guard lock(mutex_);
    for (auto it = values_.lower_bound(request.prefix());
         it != values_.end() && it->first.starts_with(request.prefix()); ++it) {
      kv::Entry* entry = reply.add_entries();
      entry->set_key(it->first);
      entry->set_value(it->second);
    }
    return {};
  }

  tern::rpc::Status Scan(tern::rpc::ServerContext&, const kv::ListRequest& request,
                         tern::rpc::ServerWriter<kv::Entry>& writer) override {
    std::vector<kv::Entry> entries;  // copied under the lock: a write may park on the window
    {
      std::lock_guard lock(mutex_);
      for (auto it = values_.lower_bound(request.prefix());
           it != values_.end() && it->first.starts_with(request.prefix()); ++it) {
        entries.emplace_back().set_key(it->first);
        entries.back().set_value(it->second);
      }
    }
    for (const kv::Entry& entry : entries) {
      // Parks while the client's window is full; fails once the client cancelled or went away.
      if (tern::rpc::Status sent = writer.write(entry); !sent.ok()) return sent;
    }
    return {};  // ends the stream: the client's read returns false after the last entry
  }

 private:
  tern::Mutex mutex_;
  std::map<std::string, std::string, std::less<>> values_;
};

// An interceptor that answers unauthenticated to calls without "authorization: Bearer <token>".
tern::rpc::Interceptor require_token(const std::string& token) {
  const std::string bearer = "Bearer " + token;
  return [bearer](tern::rpc::ServerContext& context, const tern::rpc::Next& next) {
    const std::optional<std::string_view> given = context.metadata("authorization");
    if (!given || *given != bearer) {
      return tern::rpc::Status(tern::rpc::StatusCode::unauthenticated, "no valid token");
    }
    return next(context);  // on to the handler
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:7100";
  std::string token;
  for (int i = 1; i < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (i + 1 < argc && flag == "--listen") {
      listen = argv[i + 1];
    } else if (i + 1 < argc && flag == "--token") {
      token = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: kv_server [--listen host:port] [--token secret]\n");
      return 2;
    }
  }
  std::string why;
  tern::Result<tern::net::Address> address = tern::net::Address::parse(listen, &why);
  if (!address) {
    std::fprintf(stderr, "kv_server: bad address '%s': %s\n", listen.c_str(), why.c_str());
    return 2;
  }
  // From here on SIGINT and SIGTERM wait for wait_for_stop_signal instead of ending the process.
  tern::io::block_stop_signals();
  tern::Runtime runtime;  // a worker per CPU, each with its reactor (epoll or io_uring)
  return runtime.run([&] {
    KeyValue service;
    tern::rpc::Server server({.max_concurrent_calls = 10'000});
    (void)server.add_service(service);  // fails only for a second service of the same name
    if (!token.empty()) server.add_interceptor(require_token(token));
    tern::Result<tern::net::Address> bound = server.start(*address);
    if (!bound) {
      std::fprintf(stderr, "kv_server: %s\n",
                   bound.error().message().c_str());  // names the address
      return 1;
    }
    std::printf("kv_server: serving on %s\n", bound->to_string().c_str());
    std::fflush(stdout);
    // Parks this fiber until SIGINT or SIGTERM; the server's fibers go on serving meanwhile.
    tern::Result<int> signal = tern::io::wait_for_stop_signal();
    // Graceful stop: goaway to every client, then up to 5 s for the calls in flight.
    const std::size_t cut_off = server.stop(tern::deadline_after(std::chrono::seconds(5)));
    std::printf("kv_server: stopped (%s) after %llu calls, %zu cut off\n",
                signal ? strsignal(*signal) : signal.error().message().c_str(),
                static_cast<unsigned long long>(server.stats().calls), cut_off);
    return 0;
  });
}
