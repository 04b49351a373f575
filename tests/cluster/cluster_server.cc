// cluster_server: the server program the cluster tests run on their hosts (docs/cluster.md). It
// serves tern.cluster_test.Probe, whose replies name the server, so that a client can tell which
// host answered each call. With --etcd it registers in etcd (and revokes that before draining).
// Prints "cluster_server NAME: listening on HOST:PORT" once it accepts; on SIGTERM stops
// gracefully (goaway, calls in flight finish within --grace-ms) and exits 0.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "cluster.tern.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/signal.h"
#include "tern/net/address.h"
#include "tern/rpc/server.h"

namespace {

// Probe/Whoami: the server's name and the request's seq. Runs on handler fibers of every worker.
class ProbeService final : public tern::cluster_test::ProbeBase {
 public:
  explicit ProbeService(std::string name) : name_(std::move(name)) {}

  tern::rpc::Status Whoami(tern::rpc::ServerContext&, const tern::cluster_test::WhoRequest& request,
                           tern::cluster_test::WhoReply& reply) override {
    reply.set_server(name_);
    reply.set_seq(request.seq());
    return {};
  }

  // Probe/Chat: a Whoami answer to every message, until the client closes its side or the
  // stream fails; prints "cluster_server NAME: chat ended: STATUS" either way.
  tern::rpc::Status Chat(
      tern::rpc::ServerContext&,
      tern::rpc::ServerReaderWriter<tern::cluster_test::WhoRequest, tern::cluster_test::WhoReply>&
          stream) override {
    tern::cluster_test::WhoRequest request;
    tern::cluster_test::WhoReply reply;
    tern::rpc::Status status;
    for (;;) {
      tern::rpc::Result<bool> got = stream.read(request);
      if (!got) {
        status = got.error();
        break;
      }
      if (!*got) break;  // the client closed its side: end ok
      reply.set_server(name_);
      reply.set_seq(request.seq());
      status = stream.write(reply);
      if (!status.ok()) break;
    }
    std::printf("cluster_server %s: chat ended: %s\n", name_.c_str(), status.to_string().c_str());
    std::fflush(stdout);
    return status;
  }

 private:
  std::string name_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string name = "server";
  std::string listen = "127.0.0.1:0";
  std::size_t threads = 1;
  std::string io = "auto";
  unsigned grace_ms = 2000;
  std::string etcd;
  CLI::App app{
      "cluster_server: the tern.cluster_test.Probe server of tern's cluster tests; Whoami answers\n"
      "with --name. Prints 'cluster_server NAME: listening on HOST:PORT'; stops gracefully on\n"
      "SIGTERM/SIGINT."};
  app.add_option("--name", name, "the name replies carry")->capture_default_str();
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: the kernel picks)")
      ->capture_default_str();
  app.add_option("-t,--threads", threads, "worker threads")->capture_default_str();
  app.add_option("--io", io, "I/O backend: epoll, uring or auto")
      ->check(CLI::IsMember({"epoll", "uring", "auto"}))
      ->capture_default_str();
  app.add_option("--grace-ms", grace_ms, "how long calls in flight may finish on SIGTERM")
      ->capture_default_str();
  app.add_option("--etcd", etcd,
                 "register in etcd at these client endpoints (HOST:PORT,HOST:PORT; empty: do not)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const tern::Result<tern::io::BackendChoice> backend = tern::io::parse_backend(io);
  std::string why;
  const tern::Result<tern::net::Address> address = tern::net::Address::parse(listen, &why);
  if (!backend || !address) {
    std::fprintf(stderr, "cluster_server: bad --io or --listen: %s\n", why.c_str());
    return 2;
  }
  tern::io::block_stop_signals();
  tern::Runtime runtime({.workers = threads, .make_parker = tern::io::reactors(*backend)});
  return runtime.run([&]() -> int {
    ProbeService service(name);
    tern::rpc::ServerOptions options;
    options.registry.etcd = etcd;
    options.registry.timeout = std::chrono::milliseconds(500);
    // The scenarios' fast settings: a client that vanishes is given up on after about 3 s (the
    // default waits 90 s).
    options.tcp.keepalive = {
        .idle = std::chrono::seconds{1}, .interval = std::chrono::seconds{1}, .count = 2};
    tern::rpc::Server server(options);
    if (!server.add_service(service)) return 1;
    const tern::Result<tern::net::Address> bound = server.start(*address);
    if (!bound) {
      std::fprintf(stderr, "cluster_server %s: %s\n", name.c_str(),
                   bound.error().message().c_str());
      return 1;
    }
    std::printf("cluster_server %s: listening on %s\n", name.c_str(), bound->to_string().c_str());
    std::fflush(stdout);
    (void)tern::io::wait_for_stop_signal();
    const std::size_t cut = server.stop(tern::deadline_after(std::chrono::milliseconds(grace_ms)));
    std::printf("cluster_server %s: stopped, %llu calls served, %zu cut\n", name.c_str(),
                static_cast<unsigned long long>(server.stats().calls), cut);
    return 0;
  });
}
