// tern's own I/O in a program linked with tern::hook, under the backend named by TERN_IO: it
// calls libc (or the sanitizer's interceptors) directly through tern's table, so a TcpServer
// echo, TcpStream clients and an rpc call never enter a replacement, while a plain libc call of
// the program's own still does.
#include <gtest/gtest.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "hook_test_util.h"
#include "rpc_test.tern.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/hook/detail/calls.h"
#include "tern/hook/hook.h"
#include "tern/net/tcp_server.h"
#include "tern/net/tcp_stream.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"

namespace {

using namespace std::chrono_literals;
using tern::hook::detail::count_hooked_calls;
using tern::hook::detail::hooked_calls;
using tern::net::Address;

// Counts the calls that reach the replacements from construction to stop().
class CallCount {
 public:
  CallCount() : before_(hooked_calls()) { count_hooked_calls(true); }
  CallCount(const CallCount&) = delete;
  CallCount& operator=(const CallCount&) = delete;
  ~CallCount() { count_hooked_calls(false); }
  // Stops counting; the calls counted since construction.
  std::uint64_t stop() {
    count_hooked_calls(false);
    return hooked_calls() - before_;
  }

 private:
  std::uint64_t before_;
};

class EchoService final : public tern::rpc_test::EchoServiceBase {
 public:
  tern::rpc::Status Echo(tern::rpc::ServerContext&, const tern::rpc_test::EchoRequest& request,
                         tern::rpc_test::EchoReply& reply) override {
    reply.set_text(request.text());
    return {};
  }
};

TEST(HookBypass, TernsTableHoldsTheOriginalsNotTheReplacements) {
  // In this executable each name below is tern::hook's replacement; tern's table must hold
  // something else for every one of them (libc's function or a sanitizer's interceptor).
  const tern::detail::SysCalls& sys = tern::detail::sys;
  EXPECT_NE(reinterpret_cast<void*>(sys.socket), reinterpret_cast<void*>(&::socket));
  EXPECT_NE(reinterpret_cast<void*>(sys.connect), reinterpret_cast<void*>(&::connect));
  EXPECT_NE(reinterpret_cast<void*>(sys.accept), reinterpret_cast<void*>(&::accept));
  EXPECT_NE(reinterpret_cast<void*>(sys.accept4), reinterpret_cast<void*>(&::accept4));
  EXPECT_NE(reinterpret_cast<void*>(sys.read), reinterpret_cast<void*>(&::read));
  EXPECT_NE(reinterpret_cast<void*>(sys.write), reinterpret_cast<void*>(&::write));
  EXPECT_NE(reinterpret_cast<void*>(sys.readv), reinterpret_cast<void*>(&::readv));
  EXPECT_NE(reinterpret_cast<void*>(sys.writev), reinterpret_cast<void*>(&::writev));
  EXPECT_NE(reinterpret_cast<void*>(sys.recv), reinterpret_cast<void*>(&::recv));
  EXPECT_NE(reinterpret_cast<void*>(sys.recvfrom), reinterpret_cast<void*>(&::recvfrom));
  EXPECT_NE(reinterpret_cast<void*>(sys.recvmsg), reinterpret_cast<void*>(&::recvmsg));
  EXPECT_NE(reinterpret_cast<void*>(sys.send), reinterpret_cast<void*>(&::send));
  EXPECT_NE(reinterpret_cast<void*>(sys.sendto), reinterpret_cast<void*>(&::sendto));
  EXPECT_NE(reinterpret_cast<void*>(sys.sendmsg), reinterpret_cast<void*>(&::sendmsg));
  EXPECT_NE(reinterpret_cast<void*>(sys.poll), reinterpret_cast<void*>(&::poll));
  EXPECT_NE(reinterpret_cast<void*>(sys.ppoll), reinterpret_cast<void*>(&::ppoll));
  EXPECT_NE(reinterpret_cast<void*>(sys.select), reinterpret_cast<void*>(&::select));
  EXPECT_NE(reinterpret_cast<void*>(sys.close), reinterpret_cast<void*>(&::close));
  EXPECT_NE(reinterpret_cast<void*>(sys.dup), reinterpret_cast<void*>(&::dup));
  EXPECT_NE(reinterpret_cast<void*>(sys.dup2), reinterpret_cast<void*>(&::dup2));
  EXPECT_NE(reinterpret_cast<void*>(sys.dup3), reinterpret_cast<void*>(&::dup3));
  EXPECT_NE(reinterpret_cast<void*>(sys.fcntl), reinterpret_cast<void*>(&::fcntl));
  EXPECT_NE(reinterpret_cast<void*>(sys.ioctl), reinterpret_cast<void*>(&::ioctl));
  EXPECT_NE(reinterpret_cast<void*>(sys.setsockopt), reinterpret_cast<void*>(&::setsockopt));
  EXPECT_NE(reinterpret_cast<void*>(sys.sleep), reinterpret_cast<void*>(&::sleep));
  EXPECT_NE(reinterpret_cast<void*>(sys.usleep), reinterpret_cast<void*>(&::usleep));
  EXPECT_NE(reinterpret_cast<void*>(sys.nanosleep), reinterpret_cast<void*>(&::nanosleep));
  EXPECT_NE(reinterpret_cast<void*>(sys.getaddrinfo), reinterpret_cast<void*>(&::getaddrinfo));
  EXPECT_NE(reinterpret_cast<void*>(sys.gethostbyname), reinterpret_cast<void*>(&::gethostbyname));
  EXPECT_NE(reinterpret_cast<void*>(sys.gethostbyname_r),
            reinterpret_cast<void*>(&::gethostbyname_r));
  EXPECT_NE(reinterpret_cast<void*>(sys.epoll_wait), reinterpret_cast<void*>(&::epoll_wait));
  EXPECT_NE(reinterpret_cast<void*>(sys.epoll_pwait), reinterpret_cast<void*>(&::epoll_pwait));
}

TEST(HookBypass, TcpEchoOfManyMessagesNeverEntersTheHooks) {
  constexpr int kClients = 4;
  constexpr int kMessages = 500;
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    ASSERT_TRUE(tern::hook::parks_fibers());
    CallCount count;
    tern::net::TcpServer server({}, [](tern::net::TcpStream& stream) {
      std::array<std::byte, 4096> buf;
      for (;;) {
        tern::Result<std::size_t> n = stream.read(buf);
        if (!n || *n == 0) return;
        if (!stream.write_all(std::span(buf.data(), *n))) return;
      }
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    int echoed = 0;
    tern::WaitGroup clients;
    clients.add(kClients);
    for (int c = 0; c < kClients; ++c) {
      tern::spawn([&, c] {
        tern::Result<tern::net::TcpStream> stream = tern::net::TcpStream::connect(*bound);
        EXPECT_TRUE(stream) << stream.error().message();
        for (int m = 0; stream && m < kMessages; ++m) {
          const std::string message = "client " + std::to_string(c) + " message " +
                                      std::to_string(m) +
                                      std::string(static_cast<std::size_t>(m), 'x');
          std::string back(message.size(), '\0');
          const bool sent = static_cast<bool>(stream->write_all(std::as_bytes(std::span(message))));
          const bool got = sent && static_cast<bool>(
                                       stream->read_exact(std::as_writable_bytes(std::span(back))));
          EXPECT_TRUE(got) << "client " << c << " message " << m;
          if (!got) break;
          EXPECT_EQ(back, message);
          ++echoed;
        }
        clients.done();
      }).detach();
    }
    ASSERT_TRUE(clients.wait_for(60s));
    EXPECT_EQ(echoed, kClients * kMessages);
    server.stop(tern::deadline_after(5s));
    EXPECT_EQ(count.stop(), 0u);
  });
}

TEST(HookBypass, RpcCallsNeverEnterTheHooks) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    CallCount count;
    EchoService service;
    tern::rpc::Server server;
    ASSERT_TRUE(server.add_service(service));
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    {
      auto channel = tern::rpc::Channel::open(bound->to_string());
      ASSERT_TRUE(channel) << channel.error().to_string();
      tern::rpc_test::EchoServiceClient client(*channel);
      for (int i = 0; i < 50; ++i) {
        tern::rpc_test::EchoRequest request;
        request.set_text("call " + std::to_string(i));
        auto reply = client.Echo(request);
        ASSERT_TRUE(reply) << reply.error().to_string();
        EXPECT_EQ(reply->text(), request.text());
      }
      channel->close();
    }
    server.stop(tern::deadline_after(5s));
    EXPECT_EQ(count.stop(), 0u);
  });
}

TEST(HookBypass, TheProgramsOwnReadInAFiberEntersTheHook) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    hook_test::Listener listener;
    const int client = hook_test::connect_to(listener.port);
    ASSERT_GE(client, 0);
    const int server = ::accept(listener.fd, nullptr, nullptr);
    ASSERT_GE(server, 0);
    ASSERT_EQ(tern::detail::sys.write(server, "ping", 4), 4);  // tern's path: not counted
    CallCount count;
    char buf[8] = {};
    EXPECT_EQ(::read(client, buf, sizeof buf), 4);
    EXPECT_EQ(std::string(buf, 4), "ping");
    EXPECT_GT(count.stop(), 0u);
    ::close(client);
    ::close(server);
  });
}

}  // namespace
