// Mutual TLS over tern::rpc, authorizing by certificate name: any client whose certificate
// chains to CA may Get, only one whose certificate names writer.kv.example may Put. Calls itself as
// each client; exits 0 if every answer follows the rule. Usage: mtls_server CA SERVER_CRT
// SERVER_KEY WRITER_CRT WRITER_KEY READER_CRT READER_KEY
#include <tern/fiber/runtime.h>
#include <tern/rpc/channel.h>
#include <tern/rpc/server.h>
#include <tern/tls/tls_stream.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "kv.tern.h"  // generated from kv.proto by tern_add_proto

namespace {
namespace tls = tern::tls;
using tern::rpc::ServerContext;
using tern::rpc::Status;
using tern::rpc::StatusCode;

// The interceptor: the caller's verified certificate decides which methods it may call.
Status authorize(ServerContext& context, const tern::rpc::Next& next) {
  const tls::PeerIdentity* peer = context.peer_identity();
  if (peer == nullptr || !peer->verified) return {StatusCode::unauthenticated, "no certificate"};
  const bool writer = std::ranges::count(peer->names, "writer.kv.example") > 0;
  if (context.method() != "Get" && !writer)
    return {StatusCode::permission_denied, peer->subject + " may only call Get"};
  return next(context);  // on to the handler
}

// One value, enough to show the rule (one worker: handlers never run at once).
struct Store final : kv::KeyValueBase {
  Status Get(ServerContext&, const kv::GetRequest&, kv::GetReply& reply) override {
    reply.set_value(value);
    return {};
  }
  Status Put(ServerContext&, const kv::PutRequest& request, kv::PutReply&) override {
    value = request.value();
    return {};
  }
  std::string value;
};

// Whether the client with certificate argv[at], key argv[at + 1] gets `put` for a Put, ok for a
// Get.
bool check(const std::string& target, char** argv, int at, StatusCode put) {
  tern::rpc::ChannelOptions options;
  options.tls = *tls::TlsContext::client(
      {.ca_file = argv[1], .certificate = {tls::Certificate::files(argv[at], argv[at + 1])}});
  options.tls_server_name = "localhost";  // the name on the server's certificate
  auto channel = tern::rpc::Channel::open(target, options);
  if (!channel) return false;
  kv::KeyValueClient client(*channel);
  tern::rpc::ClientContext put_context, get_context;
  kv::PutReply put_reply;  // (empty)
  kv::GetReply get_reply;
  const Status wrote = client.Put(put_context, kv::PutRequest(), put_reply);
  const Status read = client.Get(get_context, kv::GetRequest(), get_reply);
  std::printf("%s: Put %s, Get %s\n", argv[at], wrote.to_string().c_str(),
              read.to_string().c_str());
  return wrote.code() == put && read.ok();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) return std::fprintf(stderr, "usage: see the top of mtls_server.cc\n"), 2;
  tern::Runtime runtime({.workers = 1});
  return runtime.run([&]() -> int {
    auto context =
        tls::TlsContext::server({.certificates = {tls::Certificate::files(argv[2], argv[3])},
                                 .ca_file = argv[1],
                                 .client_auth = tls::ClientAuth::require});
    if (!context) return std::fprintf(stderr, "%s\n", context.error().message().c_str()), 1;
    Store store;
    tern::rpc::Server server({.tls = *context});
    (void)server.add_service(store);
    server.add_interceptor(authorize);
    auto bound = server.start(tern::net::Address::loopback(0));
    if (!bound) return std::fprintf(stderr, "%s\n", bound.error().message().c_str()), 1;
    const bool ok = check(bound->to_string(), argv, 4, StatusCode::ok) &&
                    check(bound->to_string(), argv, 6, StatusCode::permission_denied);
    server.stop(tern::deadline_after(std::chrono::seconds(1)));
    return ok ? 0 : 1;
  });
}
