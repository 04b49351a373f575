// A client of kv_server: waits for the server, puts, gets, lists, scans and deletes keys, and
// prints each answer. Exits with 0 when every answer is the expected one.
// Usage: kv_client host:port [token]
#include <tern/fiber/runtime.h>
#include <tern/rpc/channel.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "kv.tern.h"  // generated from kv.proto by tern_add_proto

namespace {

using namespace std::chrono_literals;

// The settings every call starts from: a deadline, and the token the server may ask for. A call
// made while no connection is up (the server restarts) waits for one until its deadline instead
// of failing at once with unavailable.
tern::rpc::ClientContext call_context(const std::string& token) {
  tern::rpc::ClientContext context;
  context.set_timeout(2s);
  context.set_wait_for_ready();
  if (!token.empty()) context.add_metadata("authorization", "Bearer " + token);
  return context;
}

// Prints a failed call; returns false, so that callers can `return failed(...)`.
bool failed(const char* what, const tern::rpc::Status& status) {
  std::printf("%s: %s\n", what, status.to_string().c_str());
  return false;
}

// Sets key = value and prints it.
bool put(kv::KeyValueClient& client, const std::string& token, const std::string& key,
         const std::string& value) {
  tern::rpc::ClientContext context = call_context(token);
  kv::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  tern::rpc::Result<kv::PutReply> reply = client.Put(context, request);  // parks this fiber
  if (!reply) return failed("put", reply.error());
  std::printf("put %s = %s%s\n", key.c_str(), value.c_str(),
              reply->replaced() ? " (replaced)" : "");
  return true;
}

// Reads key, prints the value or why there is none, and checks it against `expected` (nothing
// expected: the key must have no value).
bool get(kv::KeyValueClient& client, const std::string& token, const std::string& key,
         const char* expected) {
  tern::rpc::ClientContext context = call_context(token);
  kv::GetRequest request;
  request.set_key(key);
  tern::rpc::Result<kv::GetReply> reply = client.Get(context, request);
  if (!reply) {
    std::printf("get %s: %s\n", key.c_str(), reply.error().to_string().c_str());
    return expected == nullptr && reply.error().code() == tern::rpc::StatusCode::not_found;
  }
  std::printf("get %s = %s\n", key.c_str(), reply->value().c_str());
  return expected != nullptr && reply->value() == expected;
}

// Puts three keys at once: each call runs in its own fiber, and the futures collect the replies.
bool put_concurrently(kv::KeyValueClient& client, const std::string& token) {
  std::vector<tern::rpc::Future<kv::PutReply>> calls;
  for (const char* colour : {"red", "green", "blue"}) {
    kv::PutRequest request;
    request.set_key(std::string("colour/") + colour);
    request.set_value(colour);
    calls.push_back(client.PutAsync(call_context(token), request));
  }
  for (tern::rpc::Future<kv::PutReply>& call : calls) {
    tern::rpc::Result<kv::PutReply> reply = call.get();  // parks until that call ends
    if (!reply) return failed("put", reply.error());
  }
  std::printf("put %zu colours concurrently\n", calls.size());
  return true;
}

// Lists the keys under a prefix and checks them.
bool list(kv::KeyValueClient& client, const std::string& token, const std::string& prefix,
          const std::string& expected) {
  tern::rpc::ClientContext context = call_context(token);
  kv::ListRequest request;
  request.set_prefix(prefix);
  tern::rpc::Result<kv::ListReply> reply = client.List(context, request);
  if (!reply) return failed("list", reply.error());
  std::string found;
  for (const kv::Entry& entry : reply->entries()) {
    found += (found.empty() ? "" : " ") + entry.key() + "=" + entry.value();
  }
  std::printf("list %s: %s\n", prefix.c_str(), found.c_str());
  return found == expected;
}

// Streams the entries under a prefix (Scan) and checks them.
bool scan(kv::KeyValueClient& client, const std::string& token, const std::string& prefix,
          const std::string& expected) {
  tern::rpc::ClientContext context = call_context(token);
  kv::ListRequest request;
  request.set_prefix(prefix);
  tern::rpc::ClientReader<kv::Entry> entries = client.Scan(context, request);
  std::string found;
  kv::Entry entry;
  for (;;) {
    tern::rpc::Result<bool> got = entries.read(entry);  // parks until the next entry
    if (!got) return failed("scan", got.error());
    if (!*got) break;  // the server ended the stream with ok
    found += (found.empty() ? "" : " ") + entry.key() + "=" + entry.value();
  }
  std::printf("scan %s: %s\n", prefix.c_str(), found.c_str());
  return found == expected;
}

// Deletes key and prints whether it had a value.
bool delete_key(kv::KeyValueClient& client, const std::string& token, const std::string& key) {
  tern::rpc::ClientContext context = call_context(token);
  kv::DeleteRequest request;
  request.set_key(key);
  tern::rpc::Result<kv::DeleteReply> reply = client.Delete(context, request);
  if (!reply) return failed("delete", reply.error());
  std::printf("delete %s: %s\n", key.c_str(), reply->existed() ? "existed" : "had no value");
  return reply->existed();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kv_client host:port [token]\n");
    return 2;
  }
  const std::string target = argv[1];
  const std::string token = argc > 2 ? argv[2] : "";
  tern::Runtime runtime({.workers = 1});
  return runtime.run([&] {
    tern::rpc::Result<tern::rpc::Channel> channel = tern::rpc::Channel::open(target);
    if (!channel) {
      std::fprintf(stderr, "kv_client: %s\n", channel.error().to_string().c_str());
      return 1;
    }
    // The server may still be starting: wait up to 5 s for a connection.
    if (tern::rpc::Status up = channel->wait_connected(tern::deadline_after(5s)); !up.ok()) {
      std::fprintf(stderr, "kv_client: %s: %s\n", target.c_str(), up.to_string().c_str());
      return 1;
    }
    kv::KeyValueClient client(*channel);
    const bool ok =
        put(client, token, "greeting", "hello") && put(client, token, "greeting", "hello again") &&
        get(client, token, "greeting", "hello again") && get(client, token, "missing", nullptr) &&
        put_concurrently(client, token) &&
        list(client, token, "colour/", "colour/blue=blue colour/green=green colour/red=red") &&
        scan(client, token, "colour/", "colour/blue=blue colour/green=green colour/red=red") &&
        delete_key(client, token, "greeting") && get(client, token, "greeting", nullptr);
    std::printf("kv_client: %s\n", ok ? "every answer as expected" : "unexpected answer");
    return ok ? 0 : 1;
  });
}
