// cluster_client: a client the cluster tests run on a host of its own (docs/cluster.md), so that
// a test can kill a client: it opens a Probe/Chat stream to --target and sends and reads one
// message after another. Prints "cluster_client: chatting with NAME" after the first reply, and
// "cluster_client: chat ended: STATUS" (then exits 1) if the stream fails.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cluster.tern.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/rpc/channel.h"

int main(int argc, char** argv) {
  std::string target;
  std::string io = "auto";
  CLI::App app{
      "cluster_client: keeps a tern.cluster_test.Probe/Chat stream to --target busy, for tern's\n"
      "cluster tests. Prints 'cluster_client: chatting with NAME' once the server answered and\n"
      "'cluster_client: chat ended: STATUS' when the stream fails."};
  app.add_option("--target", target, "the server, HOST:PORT")->required();
  app.add_option("--io", io, "I/O backend: epoll, uring or auto")
      ->check(CLI::IsMember({"epoll", "uring", "auto"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const tern::Result<tern::io::BackendChoice> backend = tern::io::parse_backend(io);
  if (!backend) return 2;
  tern::Runtime runtime({.workers = 1, .make_parker = tern::io::reactors(*backend)});
  return runtime.run([&]() -> int {
    tern::rpc::Result<tern::rpc::Channel> channel = tern::rpc::Channel::open(target);
    if (!channel) {
      std::printf("cluster_client: chat ended: %s\n", channel.error().to_string().c_str());
      return 1;
    }
    tern::cluster_test::ProbeClient client(*channel);
    tern::rpc::ClientContext context;
    context.set_wait_for_ready();
    auto stream = client.Chat(context);
    tern::cluster_test::WhoRequest request;
    tern::cluster_test::WhoReply reply;
    for (std::uint64_t seq = 0;; ++seq) {
      request.set_seq(seq);
      tern::rpc::Status status = stream.write(request);
      tern::rpc::Result<bool> got =
          status.ok() ? stream.read(reply) : tern::rpc::Result<bool>(std::unexpected(status));
      if (!got || !*got) {
        const std::string why =
            got ? std::string("the server ended the stream") : got.error().to_string();
        std::printf("cluster_client: chat ended: %s\n", why.c_str());
        std::fflush(stdout);
        return 1;
      }
      if (seq == 0) {
        std::printf("cluster_client: chatting with %s\n", reply.server().c_str());
        std::fflush(stdout);
      }
      // A message every 10 ms keeps the stream busy without taking a CPU.
      (void)tern::this_fiber::sleep_for(std::chrono::milliseconds(10));
    }
  });
}
