// TcpStream, TcpListener, Unix stream sockets and UdpSocket over real loopback sockets, on the
// backend TERN_IO names (ctest runs this binary once per backend): data integrity, partial I/O,
// deadlines, cancellation, resets and half-closes, gather writes, options, addresses, and
// running out of file descriptors in accept.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/address.h"
#include "tern/net/socket.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"
#include "tern/net/udp_socket.h"
#include "test_scale.h"
#include "thread_cpu_time.h"

namespace {

using namespace std::chrono_literals;
using tern::Clock;
using tern::net::Address;
using tern::net::ListenOptions;
using tern::net::Socket;
using tern::net::TcpListener;
using tern::net::TcpStream;
using tern::net::UdpSocket;
using tern::net::UnixListener;
using tern::net::UnixStream;
using tern_test::bytes_of;
using tern_test::connect_loopback;
using tern_test::Connected;
using tern_test::Defer;
using tern_test::Fnv64;
using tern_test::patience;
using tern_test::run_on;
using tern_test::text_of;

template <typename T>
std::error_code error_of(const tern::Result<T>& result) {
  return result ? std::error_code() : result.error();
}

// Reads until the peer closes its side; the bytes as text. Worker fibers only.
std::string read_to_end(TcpStream& stream) {
  std::string out;
  std::array<std::byte, 4096> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf, patience());
    if (!n) {
      ADD_FAILURE() << "read: " << n.error().message();
      return out;
    }
    if (*n == 0) return out;
    out += text_of(std::span(buf).first(*n));
  }
}

// Reads exactly `size` bytes as text. Worker fibers only.
std::string read_text(TcpStream& stream, std::size_t size) {
  std::string out(size, '\0');
  tern::Result<void> r =
      stream.read_exact(std::as_writable_bytes(std::span(out.data(), out.size())), patience());
  EXPECT_TRUE(r) << r.error().message();
  return out;
}

// A port nothing listens on (the kernel picked it for a listener that is closed again).
std::uint16_t unused_port() {
  tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
  EXPECT_TRUE(listener);
  return listener ? listener->local_address()->port() : 1;
}

void abort_on_close(TcpStream& stream) {
  const linger abortive = {.l_onoff = 1, .l_linger = 0};
  EXPECT_EQ(::setsockopt(stream.fd(), SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive), 0);
}

TEST(TcpStream, ConnectAcceptReadWrite) {
  run_on(1, [] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener) << listener.error().message();
    tern::Result<Address> address = listener->local_address();
    ASSERT_TRUE(address);
    EXPECT_EQ(address->family(), AF_INET);
    EXPECT_NE(address->port(), 0);
    EXPECT_EQ(address->with_port(0), Address::loopback(0));

    tern::Result<TcpStream> client = TcpStream::connect(*address, patience());
    ASSERT_TRUE(client) << client.error().message();
    Address peer;
    tern::Result<TcpStream> server = listener->accept(&peer, patience());
    ASSERT_TRUE(server) << server.error().message();
    EXPECT_TRUE(client->is_open());
    EXPECT_TRUE(server->is_open());

    // Both ends agree on who is who.
    EXPECT_EQ(peer, *client->local_address());
    EXPECT_EQ(*server->peer_address(), *client->local_address());
    EXPECT_EQ(*client->peer_address(), *address);
    EXPECT_EQ(*server->local_address(), *address);
    EXPECT_EQ(client->local_address()->to_string().rfind("127.0.0.1:", 0), 0u);

    ASSERT_TRUE(client->write_all(bytes_of("ping"), patience()));
    EXPECT_EQ(read_text(*server, 4), "ping");
    tern::Result<std::size_t> n = server->write(bytes_of("pong!"), patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 5u);  // a few bytes fit in an empty socket buffer
    EXPECT_EQ(read_text(*client, 5), "pong!");

    client->close();
    EXPECT_FALSE(client->is_open());
    EXPECT_EQ(read_to_end(*server), "");
  });
}

// connect_from binds the source address first: the listener sees it as the peer, and each source
// address gets a port of its own choosing (IP_BIND_ADDRESS_NO_PORT).
TEST(TcpStream, ConnectFromASourceAddressIsThePeerTheServerSees) {
  run_on(1, [] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener) << listener.error().message();
    const Address address = *listener->local_address();
    for (const char* source_text : {"127.0.0.2:0", "127.0.0.3:0"}) {
      const Address source = *Address::parse(source_text);
      tern::Result<TcpStream> client = TcpStream::connect_from(source, address, patience());
      ASSERT_TRUE(client) << client.error().message();
      Address peer;
      tern::Result<TcpStream> server = listener->accept(&peer, patience());
      ASSERT_TRUE(server) << server.error().message();
      EXPECT_EQ(peer.with_port(0), source);
      EXPECT_NE(peer.port(), 0);
      EXPECT_EQ(peer, *client->local_address());
      ASSERT_TRUE(client->write_all(bytes_of(source_text), patience()));
      EXPECT_EQ(read_text(*server, std::string(source_text).size()), source_text);
    }
    // A source address this machine does not have: the bind fails and says what for.
    const Address foreign = *Address::parse("192.0.2.1:0");
    tern::Result<TcpStream> client = TcpStream::connect_from(foreign, address, patience());
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error(), std::errc::address_not_available);
    EXPECT_EQ(client.error().message().rfind(
                  "bind 192.0.2.1:0 to connect " + address.to_string() + ": ", 0),
              0u)
        << client.error().message();
  });
}

TEST(TcpStream, ConnectsToEveryTextForm) {
  run_on(1, [] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    const std::string port = std::to_string(listener->local_address()->port());
    for (const std::string& target :
         {"127.0.0.1:" + port, "tcp://127.0.0.1:" + port, "localhost:" + port}) {
      tern::Result<TcpStream> client = TcpStream::connect(target, patience());
      ASSERT_TRUE(client) << target << ": " << client.error().message();
      tern::Result<TcpStream> server = listener->accept(patience());
      ASSERT_TRUE(server) << server.error().message();
      ASSERT_TRUE(client->write_all(bytes_of(target), patience()));
      EXPECT_EQ(read_text(*server, target.size()), target);
    }
  });
}

TEST(TcpStream, ConnectWithoutListenerIsRefused) {
  run_on(1, [] {
    const Address nobody = Address::loopback(unused_port());
    tern::Result<TcpStream> client = TcpStream::connect(nobody, patience());
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error(), std::errc::connection_refused) << client.error().message();
    client = TcpStream::connect("not an address", patience());
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error(), std::errc::invalid_argument);
  });
}

// Writes `total` pattern bytes and then half-closes, while reading what the peer sends until it
// half-closes. Both directions run at once. Worker fibers only.
void exchange(TcpStream& stream, std::size_t total, std::uint64_t seed, Fnv64& sent,
              Fnv64& received) {
  tern::Fiber writer = tern::spawn([&] {
    std::vector<std::byte> chunk(200'003);
    std::uint64_t state = seed;
    std::size_t left = total;
    while (left > 0) {
      const std::span<std::byte> piece = std::span(chunk).first(std::min(left, chunk.size()));
      tern_test::fill_pattern(piece, state);
      tern::Result<void> written = stream.write_all(piece, patience());
      ASSERT_TRUE(written) << written.error().message();
      sent.update(piece);
      left -= piece.size();
    }
    ASSERT_TRUE(stream.shutdown(SHUT_WR));
  });
  std::vector<std::byte> buf(65'521);
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf, patience());
    EXPECT_TRUE(n) << n.error().message();
    if (!n || *n == 0) break;
    received.update(std::span(buf).first(*n));
  }
  writer.join();
}

TEST(TcpStream, SixteenMiBEachWayAtOnceArriveIntact) {
  const std::size_t total = static_cast<std::size_t>(tern_test::scaled(16)) << 20;
  Fnv64 client_sent, client_received, server_sent, server_received;
  Address address;
  tern::Event listening;
  tern::WaitGroup served;
  run_on(2, [&] {
    // The server side runs on worker 1, the client on worker 0.
    served.add();
    tern::Result<void> posted = tern::post(1, [&] {
      Defer done([&] { served.done(); });
      tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
      ASSERT_TRUE(listener) << listener.error().message();
      address = *listener->local_address();
      listening.set();
      tern::Result<TcpStream> stream = listener->accept(patience());
      ASSERT_TRUE(stream) << stream.error().message();
      exchange(*stream, total, 0x5eed0001, server_sent, server_received);
    });
    ASSERT_TRUE(posted);
    ASSERT_TRUE(listening.wait_until(patience()));
    tern::Result<TcpStream> client = TcpStream::connect(address, patience());
    ASSERT_TRUE(client) << client.error().message();
    exchange(*client, total, 0x5eed0002, client_sent, client_received);
    ASSERT_TRUE(served.wait_until(patience()));
  });
  EXPECT_EQ(client_sent.size(), total);
  EXPECT_EQ(server_sent.size(), total);
  EXPECT_EQ(server_received.size(), total);
  EXPECT_EQ(client_received.size(), total);
  EXPECT_EQ(server_received.value(), client_sent.value());
  EXPECT_EQ(client_received.value(), server_sent.value());
  EXPECT_NE(client_sent.value(), server_sent.value());  // the two directions differ
}

TEST(TcpStream, PartialReadsAndWritesWithSmallSocketBuffers) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    ASSERT_TRUE(pair->client.set_send_buffer(16 * 1024));
    ASSERT_TRUE(pair->server.set_receive_buffer(16 * 1024));
    std::vector<std::byte> data(2 << 20);
    std::uint64_t state = 7;
    tern_test::fill_pattern(data, state);

    int writes = 0;
    int partial_writes = 0;
    tern::Fiber writer = tern::spawn([&] {
      std::span<const std::byte> left = data;
      while (!left.empty()) {
        // One call asks for everything left; a small send buffer takes only some of it.
        tern::Result<std::size_t> n = pair->client.write(left, patience());
        ASSERT_TRUE(n) << n.error().message();
        ASSERT_GT(*n, 0u);
        ASSERT_LE(*n, left.size());
        ++writes;
        if (*n < left.size()) ++partial_writes;
        left = left.subspan(*n);
      }
      ASSERT_TRUE(pair->client.shutdown(SHUT_WR));
    });
    std::vector<std::byte> received;
    std::vector<std::byte> buf(512 * 1024);
    int short_reads = 0;
    for (;;) {
      tern::Result<std::size_t> n = pair->server.read(buf, patience());
      EXPECT_TRUE(n) << n.error().message();
      if (!n || *n == 0) break;
      if (*n < buf.size()) ++short_reads;
      received.insert(received.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
    writer.join();
    EXPECT_GT(partial_writes, 0) << "in " << writes << " writes";
    EXPECT_GT(short_reads, 0);
    ASSERT_EQ(received.size(), data.size());
    EXPECT_TRUE(received == data);
  });
}

TEST(TcpStream, UrgentDataDoesNotStallReads) {
  // A read stops short at an urgent byte while data is still queued behind it; the reader must
  // still get that data without a new arrival to wake it.
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::string received;
    tern::Fiber reader = tern::spawn([&] {
      std::array<std::byte, 64> buf;
      while (received.size() < 4) {  // parks first: everything below arrives while it waits
        tern::Result<std::size_t> n = pair->server.read(buf, tern::deadline_after(5s));
        ASSERT_TRUE(n) << n.error().message() << " after \"" << received << "\"";
        ASSERT_GT(*n, 0u);
        received += text_of(std::span(buf).first(*n));
      }
    });
    tern::this_fiber::yield();
    ASSERT_TRUE(pair->client.write_all(bytes_of("ab"), patience()));
    ASSERT_EQ(::send(pair->client.fd(), "c", 1, MSG_OOB), 1);
    ASSERT_TRUE(pair->client.write_all(bytes_of("de"), patience()));
    reader.join();
    EXPECT_EQ(received, "abde") << "the urgent byte is out of band";
  });
}

TEST(TcpStream, ReadExactAndEndOfStream) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    ASSERT_TRUE(pair->client.write_all(bytes_of("0123456789"), patience()));
    pair->client.close();

    EXPECT_EQ(read_text(pair->server, 4), "0123");
    std::array<std::byte, 10> rest;  // only 6 bytes are left
    tern::Result<void> exact = pair->server.read_exact(rest, patience());
    ASSERT_FALSE(exact);
    EXPECT_EQ(exact.error(), tern::Errc::eof) << exact.error().message();
    EXPECT_EQ(exact.error(), tern::make_error_code(tern::Errc::eof));
    tern::Result<std::size_t> n = pair->server.read(rest, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 0u);  // still the end

    // Exactly what is left, then end of stream, succeeds.
    tern::Result<Connected> second = connect_loopback();
    ASSERT_TRUE(second) << second.error().message();
    ASSERT_TRUE(second->client.write_all(bytes_of("abc"), patience()));
    second->client.close();
    EXPECT_EQ(read_text(second->server, 3), "abc");
    EXPECT_EQ(read_to_end(second->server), "");
    // An empty read_exact needs nothing.
    EXPECT_TRUE(second->server.read_exact({}, patience()));
  });
}

TEST(TcpStream, WaitReadableWaitsForDataOrTheCloseAndReadsNothing) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    // Nothing sent: the wait times out, and so does one under set_timeout.
    const auto start = Clock::now();
    tern::Result<void> idle = pair->server.wait_readable(Clock::now() + 30ms);
    ASSERT_FALSE(idle);
    EXPECT_EQ(idle.error(), std::errc::timed_out);
    EXPECT_GE(Clock::now() - start, 30ms);
    pair->server.set_timeout(20ms);
    EXPECT_EQ(error_of(pair->server.wait_readable()), std::errc::timed_out);
    pair->server.set_timeout(0ms);

    // A write from the peer ends a wait in progress; the data is all still there to read.
    tern::Fiber writer = tern::spawn([&] {
      (void)tern::this_fiber::sleep_for(10ms);
      EXPECT_TRUE(pair->client.write_all(bytes_of("ready"), patience()));
    });
    ASSERT_TRUE(pair->server.wait_readable(patience()));
    writer.join();
    EXPECT_TRUE(pair->server.wait_readable(patience())) << "data already there: no wait";
    std::array<std::byte, 64> buf;
    tern::Result<std::size_t> n = pair->server.read(buf, patience());  // empties the queue
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "ready");

    // After a read that emptied the queue, a wait that ends on new data is followed by a read
    // that returns it at once.
    writer = tern::spawn([&] {
      (void)tern::this_fiber::sleep_for(10ms);
      EXPECT_TRUE(pair->client.write_all(bytes_of("again"), patience()));
    });
    ASSERT_TRUE(pair->server.wait_readable(patience()));
    writer.join();
    n = pair->server.read(buf, Clock::now() + 2s);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "again");

    // An interrupt ends the wait; the stream still works.
    tern::Fiber waiter = tern::spawn([&] {
      EXPECT_EQ(error_of(pair->server.wait_readable(patience())), std::errc::operation_canceled);
    });
    tern::this_fiber::yield();
    waiter.interrupt();
    waiter.join();

    // The peer's close makes the stream readable: the read then sees the end.
    pair->client.close();
    ASSERT_TRUE(pair->server.wait_readable(patience()));
    EXPECT_EQ(read_to_end(pair->server), "");
  });
}

TEST(TcpStream, WaitReadableSeesDataThatCameBeforeItAndDataLeftQueued) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    // The request is queued before the server's first call on its fresh stream (a short
    // session's usual order; loopback queues it before write_all returns): a wait whose
    // deadline has already passed still sees it.
    ASSERT_TRUE(pair->client.write_all(bytes_of("early"), patience()));
    EXPECT_TRUE(pair->server.wait_readable(Clock::now())) << "five bytes are queued";
    EXPECT_TRUE(pair->server.wait_readable(patience()));
    // A read that leaves bytes queued is followed by no new edge: the wait still ends at once.
    std::array<std::byte, 2> head;
    ASSERT_TRUE(pair->server.read_exact(head, patience()));
    EXPECT_EQ(text_of(head), "ea");
    EXPECT_TRUE(pair->server.wait_readable(Clock::now())) << "three bytes are still queued";
    std::array<std::byte, 64> buf;
    tern::Result<std::size_t> n = pair->server.read(buf, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "rly");
    // Queue empty: a wait with no time left reports the deadline, and nothing is lost.
    EXPECT_EQ(error_of(pair->server.wait_readable(Clock::now())), std::errc::timed_out);
    ASSERT_TRUE(pair->client.write_all(bytes_of("next"), patience()));
    ASSERT_TRUE(pair->server.wait_readable(patience()));
    n = pair->server.read(buf, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "next");
  });
}

TEST(TcpDeadline, ReadTimesOutAndLosesNothing) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::array<std::byte, 16> buf;
    const auto start = Clock::now();
    tern::Result<std::size_t> n = pair->server.read(buf, Clock::now() + 30ms);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_GE(Clock::now() - start, 30ms);
    tern::Result<void> exact = pair->server.read_exact(buf, Clock::now() + 20ms);
    ASSERT_FALSE(exact);
    EXPECT_EQ(exact.error(), std::errc::timed_out);

    ASSERT_TRUE(pair->client.write_all(bytes_of("after"), patience()));
    EXPECT_EQ(read_text(pair->server, 5), "after");
    // A deadline already past still returns data that is there.
    ASSERT_TRUE(pair->client.write_all(bytes_of("now"), patience()));
    std::string got;
    while (got.size() < 3) {
      n = pair->server.read(buf, patience());
      ASSERT_TRUE(n);
      got += text_of(std::span(buf).first(*n));
    }
    EXPECT_EQ(got, "now");
  });
}

TEST(TcpDeadline, WriteTimesOutAndWhatItReportsIsExactlyWhatArrives) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    ASSERT_TRUE(pair->client.set_send_buffer(16 * 1024));
    ASSERT_TRUE(pair->server.set_receive_buffer(16 * 1024));
    Fnv64 sent;
    std::vector<std::byte> chunk(64 * 1024);
    std::span<const std::byte> pending;
    std::uint64_t state = 99;
    std::error_code failure;
    // Nobody reads: the buffers fill and a write times out. Bounded at 256 MiB.
    for (int i = 0; i < 4096 && !failure; ++i) {
      if (pending.empty()) {
        tern_test::fill_pattern(chunk, state);
        pending = chunk;
      }
      const auto start = Clock::now();
      tern::Result<std::size_t> n = pair->client.write(pending, Clock::now() + 30ms);
      if (!n) {
        failure = n.error();
        EXPECT_GE(Clock::now() - start, 30ms);
        break;
      }
      sent.update(pending.first(*n));
      pending = pending.subspan(*n);
    }
    ASSERT_EQ(failure, std::errc::timed_out) << failure.message();
    const std::size_t before_timeout = sent.size();
    EXPECT_GT(before_timeout, 0u);

    // Finish the interrupted chunk and add a tail while the peer drains: the peer must see
    // exactly the bytes reported written, then the rest, with nothing lost or repeated.
    tern::Fiber writer = tern::spawn([&] {
      ASSERT_TRUE(pair->client.write_all(pending, patience()));
      sent.update(pending);
      ASSERT_TRUE(pair->client.write_all(bytes_of("tail"), patience()));
      sent.update(bytes_of("tail"));
      ASSERT_TRUE(pair->client.shutdown(SHUT_WR));
    });
    Fnv64 received;
    std::vector<std::byte> buf(100'000);
    for (;;) {
      tern::Result<std::size_t> n = pair->server.read(buf, patience());
      EXPECT_TRUE(n) << n.error().message();
      if (!n || *n == 0) break;
      received.update(std::span(buf).first(*n));
    }
    writer.join();
    EXPECT_EQ(received.size(), sent.size());
    EXPECT_EQ(received.value(), sent.value());
  });
}

TEST(TcpDeadline, AcceptTimesOutThenAccepts) {
  run_on(1, [] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    const auto start = Clock::now();
    tern::Result<TcpStream> none = listener->accept(Clock::now() + 20ms);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), std::errc::timed_out);
    EXPECT_GE(Clock::now() - start, 20ms);
    tern::Result<TcpStream> client = TcpStream::connect(*listener->local_address(), patience());
    ASSERT_TRUE(client);
    tern::Result<TcpStream> server = listener->accept(patience());
    ASSERT_TRUE(server) << server.error().message();
  });
}

// The listen queue's length as the kernel set it: TCP_INFO of a listening socket reports it in
// tcpi_sacked.
std::uint32_t listen_queue_length(int fd) {
  tcp_info info = {};
  socklen_t size = sizeof info;
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size), 0);
  return info.tcpi_sacked;
}

// A burst of connects larger than a short listen queue loses SYNs and waits a second for each
// retransmit (the sessions benchmark at 10,000 in flight did), so the default asks for the
// kernel's limit.
TEST(TcpListener, DefaultBacklogIsTheKernelsLimit) {
  FILE* file = std::fopen("/proc/sys/net/core/somaxconn", "r");
  if (file == nullptr) GTEST_SKIP() << "net.core.somaxconn is not readable here";
  unsigned limit = 0;
  const bool read = std::fscanf(file, "%u", &limit) == 1;
  std::fclose(file);
  ASSERT_TRUE(read);
  run_on(1, [limit] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    EXPECT_EQ(listen_queue_length(listener->fd()), std::min(limit, 65535u));
    tern::Result<TcpListener> short_queue =
        TcpListener::bind(Address::loopback(0), ListenOptions{.backlog = 16});
    ASSERT_TRUE(short_queue);
    EXPECT_EQ(listen_queue_length(short_queue->fd()), std::min(limit, 16u));
  });
}

// TCP_NODELAY of a connection the listener accepted (0 or 1).
int nodelay_of(const TcpStream& stream) {
  int on = -1;
  socklen_t size = sizeof on;
  EXPECT_EQ(::getsockopt(stream.fd(), IPPROTO_TCP, TCP_NODELAY, &on, &size), 0);
  return on;
}

TEST(TcpListener, NodelayOnTheListenerComesWithEveryAcceptedConnection) {
  run_on(1, [] {
    for (const bool nodelay : {true, false}) {
      tern::Result<TcpListener> listener =
          TcpListener::bind(Address::loopback(0), ListenOptions{.nodelay = nodelay});
      ASSERT_TRUE(listener) << listener.error().message();
      for (int i = 0; i < 3; ++i) {
        tern::Result<TcpStream> client = TcpStream::connect(*listener->local_address(), patience());
        ASSERT_TRUE(client) << client.error().message();
        tern::Result<TcpStream> accepted = listener->accept(patience());
        ASSERT_TRUE(accepted) << accepted.error().message();
        EXPECT_EQ(nodelay_of(*accepted), nodelay ? 1 : 0) << "connection " << i;
        // The option changes nothing else: the connection carries bytes both ways.
        ASSERT_TRUE(client->write_all(bytes_of("ping"), patience()));
        std::array<std::byte, 4> got;
        ASSERT_TRUE(accepted->read_exact(got, patience()));
        ASSERT_TRUE(accepted->write_all(got, patience()));
        ASSERT_TRUE(client->read_exact(got, patience()));
        EXPECT_EQ(text_of(got), "ping");
      }
    }
  });
}

// With defer_accept_s, a connected client that has sent nothing is not handed over; once its
// first bytes come, accept returns it with them waiting.
TEST(TcpListener, DeferAcceptHandsOverAConnectionOnceItsFirstBytesCame) {
  run_on(1, [] {
    tern::Result<TcpListener> listener =
        TcpListener::bind(Address::loopback(0), ListenOptions{.defer_accept_s = 30});
    ASSERT_TRUE(listener) << listener.error().message();
    int deferred = 0;
    socklen_t size = sizeof deferred;
    ASSERT_EQ(::getsockopt(listener->fd(), IPPROTO_TCP, TCP_DEFER_ACCEPT, &deferred, &size), 0);
    EXPECT_GT(deferred, 0);
    tern::Result<TcpStream> client = TcpStream::connect(*listener->local_address(), patience());
    ASSERT_TRUE(client) << client.error().message();
    tern::Result<TcpStream> silent = listener->accept(Clock::now() + 20ms);
    ASSERT_FALSE(silent);
    EXPECT_EQ(silent.error(), std::errc::timed_out);
    ASSERT_TRUE(client->write_all(bytes_of("ping"), patience()));
    tern::Result<TcpStream> accepted = listener->accept(patience());
    ASSERT_TRUE(accepted) << accepted.error().message();
    std::array<std::byte, 4> got;
    ASSERT_TRUE(accepted->read_exact(got, patience()));
    EXPECT_EQ(text_of(got), "ping");
  });
}

TEST(TcpDeadline, ConnectTimesOutWhenTheBacklogIsFull) {
  run_on(1, [] {
    // With a backlog of 0 the kernel queues one connection and drops later SYNs, so those
    // connects never complete.
    tern::Result<TcpListener> listener =
        TcpListener::bind(Address::loopback(0), ListenOptions{.backlog = 0});
    ASSERT_TRUE(listener);
    const Address address = *listener->local_address();
    std::vector<TcpStream> queued;
    bool timed_out = false;
    for (int i = 0; i < 64 && !timed_out; ++i) {
      const auto start = Clock::now();
      tern::Result<TcpStream> client = TcpStream::connect(address, Clock::now() + 50ms);
      if (client) {
        queued.push_back(std::move(*client));
        continue;
      }
      EXPECT_EQ(client.error(), std::errc::timed_out) << client.error().message();
      EXPECT_GE(Clock::now() - start, 50ms);
      timed_out = true;
    }
    EXPECT_TRUE(timed_out) << "every connect beyond the backlog completed";
    EXPECT_FALSE(queued.empty());
    // The listener still works: accept what was queued.
    tern::Result<TcpStream> server = listener->accept(patience());
    ASSERT_TRUE(server) << server.error().message();
    ASSERT_TRUE(queued.front().write_all(bytes_of("queued"), patience()));
    EXPECT_EQ(read_text(*server, 6), "queued");
  });
}

TEST(TcpDeadline, SetTimeoutAppliesToCallsWithoutADeadline) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    TcpStream& server = pair->server;
    EXPECT_EQ(server.timeout(), 0ns);
    server.set_timeout(25ms);
    EXPECT_EQ(server.timeout(), 25ms);

    std::array<std::byte, 8> buf;
    auto start = Clock::now();
    tern::Result<std::size_t> n = server.read(buf);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_GE(Clock::now() - start, 25ms);
    tern::Result<void> exact = server.read_exact(buf);
    ASSERT_FALSE(exact);
    EXPECT_EQ(exact.error(), std::errc::timed_out);

    // A deadline of the call's own wins over the stream's timeout.
    start = Clock::now();
    n = server.read(buf, Clock::now() + 150ms);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_GE(Clock::now() - start, 150ms);

    // Data that arrives is read as usual.
    ASSERT_TRUE(pair->client.write_all(bytes_of("12345678"), patience()));
    EXPECT_TRUE(server.read_exact(buf));
    EXPECT_EQ(text_of(buf), "12345678");

    // Zero turns it off: a read without a deadline then waits until something happens.
    server.set_timeout(0ns);
    EXPECT_EQ(server.timeout(), 0ns);
    tern::Fiber closer = tern::spawn([&] { pair->client.close(); });
    n = server.read(buf);
    EXPECT_TRUE(n) << n.error().message();  // the end of the stream, not a timeout
    if (n) {
      EXPECT_EQ(*n, 0u);
    }
    closer.join();

    // The timeout covers writes too (nobody reads the other side).
    tern::Result<Connected> second = connect_loopback();
    ASSERT_TRUE(second) << second.error().message();
    second->server.set_timeout(25ms);
    ASSERT_TRUE(second->server.set_send_buffer(16 * 1024));
    std::vector<std::byte> big(64 * 1024);
    tern::Result<void> written;
    for (int i = 0; i < 4096 && written; ++i) written = second->server.write_all(big);
    ASSERT_FALSE(written);
    EXPECT_EQ(written.error(), std::errc::timed_out);
  });
}

TEST(TcpCancel, InterruptEndsABlockedReadAndTheStreamStillWorks) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::error_code result;
    tern::Fiber reader = tern::spawn([&] {
      std::array<std::byte, 16> buf;
      result = error_of(pair->server.read(buf, patience()));
    });
    tern::this_fiber::yield();  // the reader parks on the empty socket
    reader.interrupt();
    reader.join();
    EXPECT_EQ(result, std::errc::operation_canceled) << result.message();
    ASSERT_TRUE(pair->client.write_all(bytes_of("still here"), patience()));
    EXPECT_EQ(read_text(pair->server, 10), "still here");
  });
}

TEST(TcpCancel, InterruptEndsABlockedWrite) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::error_code result;
    tern::Fiber writer = tern::spawn([&] {
      std::vector<std::byte> big(64 * 1024);
      tern::Result<void> written;
      for (int i = 0; i < 4096 && written; ++i) written = pair->client.write_all(big, patience());
      result = error_of(written);
    });
    tern::this_fiber::yield();
    writer.interrupt();  // ends the write it is blocked in, or the next one
    writer.join();
    EXPECT_EQ(result, std::errc::operation_canceled) << result.message();
  });
}

TEST(TcpCancel, InterruptThatRacesACompletingWriteIsNotLost) {
  // io_uring batches submissions: an interrupt that arrives before the write is even submitted
  // cannot stop it (the bytes go out and write reports them), but the interrupt must then
  // end the fiber's next wait instead of vanishing.
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    tern::Result<std::size_t> written = tern::fail(std::errc::not_connected);
    std::error_code read_result;
    tern::Fiber fiber = tern::spawn([&] {
      written = pair->server.write(bytes_of("reply"), patience());
      std::array<std::byte, 16> buf;
      read_result = error_of(pair->server.read(buf, patience()));
    });
    tern::this_fiber::yield();  // the fiber is in write (io_uring) or read (epoll)
    fiber.interrupt();
    fiber.join();
    if (written) {
      EXPECT_EQ(*written, 5u);
      EXPECT_EQ(read_text(pair->client, 5), "reply");  // reported written: it was sent
      EXPECT_EQ(read_result, std::errc::operation_canceled) << read_result.message();
    } else {
      EXPECT_EQ(written.error(), std::errc::operation_canceled) << written.error().message();
    }
  });
}

TEST(TcpCancel, InterruptOrCloseEndsABlockedAccept) {
  run_on(1, [] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    std::error_code result;
    tern::Fiber acceptor = tern::spawn([&] { result = error_of(listener->accept(patience())); });
    tern::this_fiber::yield();
    acceptor.interrupt();
    acceptor.join();
    EXPECT_EQ(result, std::errc::operation_canceled) << result.message();

    // The listener keeps working after an interrupted accept.
    tern::Result<TcpStream> client = TcpStream::connect(*listener->local_address(), patience());
    ASSERT_TRUE(client);
    tern::Result<TcpStream> server = listener->accept(patience());
    ASSERT_TRUE(server) << server.error().message();

    // Closing the listener wakes an accept in progress.
    acceptor = tern::spawn([&] { result = error_of(listener->accept(patience())); });
    tern::this_fiber::yield();
    listener->close();
    EXPECT_FALSE(listener->is_open());
    acceptor.join();
    EXPECT_EQ(result, std::errc::operation_canceled) << result.message();
  });
}

TEST(TcpStream, PeerResetFailsReadsAndWritesWithConnectionReset) {
  run_on(1, [] {
    // A reader blocked when the reset arrives.
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::error_code read_result;
    tern::Fiber reader = tern::spawn([&] {
      std::array<std::byte, 16> buf;
      read_result = error_of(pair->server.read(buf, patience()));
    });
    tern::this_fiber::yield();
    abort_on_close(pair->client);
    pair->client.close();  // SO_LINGER 0: the close sends a reset
    reader.join();
    EXPECT_EQ(read_result, std::errc::connection_reset) << read_result.message();

    // A writer after the reset.
    tern::Result<Connected> second = connect_loopback();
    ASSERT_TRUE(second) << second.error().message();
    abort_on_close(second->client);
    second->client.close();
    std::vector<std::byte> chunk(64 * 1024);
    std::error_code write_result;
    for (int i = 0; i < 64 && !write_result; ++i)
      write_result = error_of(second->server.write_all(chunk, patience()));
    EXPECT_EQ(write_result, std::errc::connection_reset) << write_result.message();
  });
}

TEST(TcpStream, HalfCloseLetsThePeerStillAnswer) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    ASSERT_TRUE(pair->client.write_all(bytes_of("request"), patience()));
    ASSERT_TRUE(pair->client.shutdown(SHUT_WR));
    EXPECT_EQ(read_to_end(pair->server), "request");  // read returns 0 after the data
    // The server can still write back on its open direction.
    ASSERT_TRUE(pair->server.write_all(bytes_of("response"), patience()));
    pair->server.close();
    EXPECT_EQ(read_to_end(pair->client), "response");
    // Writing after our own shutdown fails.
    tern::Result<std::size_t> late = pair->client.write(bytes_of("x"), patience());
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error(), std::errc::broken_pipe) << late.error().message();
  });
}

TEST(TcpStream, WritevAllSendsManyIovecsInOrder) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    ASSERT_TRUE(pair->client.set_send_buffer(16 * 1024));  // partial gather writes too
    // More entries than IOV_MAX (1024), some empty, split at arbitrary byte boundaries.
    constexpr int kPieces = 3000;
    std::string expected;
    std::vector<std::size_t> sizes;
    for (int i = 0; i < kPieces; ++i) {
      const std::size_t size = static_cast<std::size_t>(i * 37 % 97);
      sizes.push_back(size);
      for (std::size_t j = 0; j < size; ++j) expected += static_cast<char>('!' + (i + j) % 90);
    }
    std::vector<iovec> iov;
    std::size_t offset = 0;
    for (std::size_t size : sizes) {
      iov.push_back({expected.data() + offset, size});
      offset += size;
    }
    std::string received;
    tern::Fiber reader = tern::spawn([&] { received = read_to_end(pair->server); });
    tern::Result<void> written = pair->client.writev_all(iov, patience());
    EXPECT_TRUE(written) << written.error().message();
    std::size_t left = 0;
    for (const iovec& entry : iov) left += entry.iov_len;
    EXPECT_EQ(left, 0u) << "writev_all advances every entry past what it wrote";
    EXPECT_TRUE(pair->client.shutdown(SHUT_WR));
    reader.join();
    EXPECT_EQ(received.size(), expected.size());
    EXPECT_TRUE(received == expected);
  });
}

TEST(TcpStream, WritevOfOnePieceSendsIt) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::string reply = "one piece";
    std::array<iovec, 1> out = {iovec{reply.data(), reply.size()}};
    tern::Result<std::size_t> n = pair->client.writev(out, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, reply.size());
    ASSERT_TRUE(pair->client.writev_all(out, patience()));
    EXPECT_EQ(out[0].iov_len, 0u) << "writev_all advances the piece past what it wrote";
    EXPECT_EQ(read_text(pair->server, 2 * reply.size()), reply + reply);
  });
}

TEST(TcpStream, MoreQueuedSaysWhatAFullReadLeftAndHeldWritesArrive) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    // 300 bytes queued before the server reads (loopback queues them before write_all returns).
    const std::string sent(300, 'q');
    ASSERT_TRUE(pair->client.write_all(bytes_of(sent), patience()));
    ASSERT_TRUE(pair->server.wait_readable(patience()));
    std::array<std::byte, 100> buf;
    // Both backends know what a read left once a read has filled its buffer.
    for (int i = 0; i < 2; ++i) {
      tern::Result<std::size_t> n = pair->server.read(buf, patience());
      ASSERT_TRUE(n) << n.error().message();
      ASSERT_EQ(*n, buf.size());
    }
    EXPECT_TRUE(pair->server.more_queued()) << "100 bytes are still queued";
    tern::Result<std::size_t> n = pair->server.read(buf, patience());
    ASSERT_TRUE(n) << n.error().message();
    ASSERT_EQ(*n, buf.size());
    EXPECT_FALSE(pair->server.more_queued()) << "the third read took the last bytes";
    ASSERT_TRUE(pair->client.write_all(bytes_of("short"), patience()));
    n = pair->server.read(buf, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "short");
    EXPECT_FALSE(pair->server.more_queued());

    // Held writes arrive, in order, with the write that ends their run or with flush().
    using tern::net::Flush;
    ASSERT_TRUE(pair->server.write_all(bytes_of("held "), patience(), Flush::later));
    std::string piece = "gathered ";
    std::array<iovec, 1> out = {iovec{piece.data(), piece.size()}};
    ASSERT_TRUE(pair->server.writev_all(out, patience(), Flush::later));
    ASSERT_TRUE(pair->server.write_all(bytes_of("sent"), patience()));
    EXPECT_EQ(read_text(pair->client, 18), "held gathered sent");
    ASSERT_TRUE(pair->server.write_all(bytes_of("flushed"), patience(), Flush::later));
    ASSERT_TRUE(pair->server.flush());
    EXPECT_EQ(read_text(pair->client, 7), "flushed");
  });
}

TEST(TcpStream, WritevAndReadvScatterAndGather) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::string head = "head:";
    std::string body = "body";
    std::array<iovec, 2> out = {iovec{head.data(), head.size()}, iovec{body.data(), body.size()}};
    tern::Result<std::size_t> n = pair->client.writev(out, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 9u);  // a small gather write goes out whole

    std::array<char, 3> a;
    std::array<char, 2> b;
    std::array<char, 4> c;
    std::vector<iovec> in = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
    std::size_t got = 0;
    std::span<iovec> left = in;
    while (got < 9) {
      n = pair->server.readv(left, patience());
      ASSERT_TRUE(n) << n.error().message();
      ASSERT_GT(*n, 0u);
      got += *n;
      for (std::size_t step = *n; step > 0;) {  // advance past what was filled
        const std::size_t used = std::min(step, left.front().iov_len);
        left.front().iov_base = static_cast<char*>(left.front().iov_base) + used;
        left.front().iov_len -= used;
        step -= used;
        if (left.front().iov_len == 0) left = left.subspan(1);
      }
    }
    EXPECT_EQ(std::string(a.data(), a.size()), "hea");
    EXPECT_EQ(std::string(b.data(), b.size()), "d:");
    EXPECT_EQ(std::string(c.data(), c.size()), "body");
  });
}

TEST(TcpStream, SocketOptions) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    TcpStream& s = pair->client;
    ASSERT_TRUE(s.set_nodelay());
    EXPECT_NE(*s.socket().get_option(IPPROTO_TCP, TCP_NODELAY), 0);
    ASSERT_TRUE(s.set_nodelay(false));
    EXPECT_EQ(*s.socket().get_option(IPPROTO_TCP, TCP_NODELAY), 0);
    ASSERT_TRUE(s.set_keepalive());
    EXPECT_NE(*s.socket().get_option(SOL_SOCKET, SO_KEEPALIVE), 0);
    ASSERT_TRUE(s.set_keepalive(false));
    EXPECT_EQ(*s.socket().get_option(SOL_SOCKET, SO_KEEPALIVE), 0);
    ASSERT_TRUE(s.set_send_buffer(64 * 1024));
    EXPECT_GE(*s.socket().get_option(SOL_SOCKET, SO_SNDBUF), 64 * 1024);
    ASSERT_TRUE(s.set_receive_buffer(32 * 1024));
    EXPECT_GE(*s.socket().get_option(SOL_SOCKET, SO_RCVBUF), 32 * 1024);
    ASSERT_TRUE(s.set_send_buffer(8 * 1024));
    EXPECT_LT(*s.socket().get_option(SOL_SOCKET, SO_SNDBUF), 64 * 1024);

    // Options on a closed stream fail with the system's error rather than crashing.
    TcpStream closed;
    EXPECT_FALSE(closed.is_open());
    tern::Result<void> r = closed.set_nodelay();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::bad_file_descriptor);
    EXPECT_FALSE(closed.local_address());
    EXPECT_FALSE(closed.peer_address());
    tern::Result<int> value = closed.socket().get_option(SOL_SOCKET, SO_TYPE);
    ASSERT_FALSE(value);
    EXPECT_EQ(value.error(), std::errc::bad_file_descriptor);
  });
}

TEST(Socket, OwnsItsDescriptor) {
  run_on(1, [] {
    tern::Result<Socket> socket = Socket::open(AF_INET, SOCK_STREAM);
    ASSERT_TRUE(socket) << socket.error().message();
    const int fd = socket->fd();
    ASSERT_GE(fd, 0);
    EXPECT_NE(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    EXPECT_EQ(*socket->get_option(SOL_SOCKET, SO_TYPE), SOCK_STREAM);

    Socket moved = std::move(*socket);
    EXPECT_FALSE(socket->is_open());
    EXPECT_EQ(moved.fd(), fd);
    const int raw = moved.release();
    EXPECT_EQ(raw, fd);
    EXPECT_FALSE(moved.is_open());
    EXPECT_NE(::fcntl(raw, F_GETFD), -1) << "release must not close";
    moved = Socket(raw);
    Socket other;
    other = std::move(moved);  // takes it over
    EXPECT_EQ(other.fd(), raw);
    other = Socket();  // assignment closes what it held
    EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
    EXPECT_EQ(errno, EBADF);

    tern::Result<Socket> bad = Socket::open(12345, SOCK_STREAM);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), std::errc::address_family_not_supported);
  });
}

// A fresh directory under /tmp (short, so socket paths fit in sun_path), removed with the
// socket files in it.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/tern-net-XXXXXX";
    EXPECT_NE(::mkdtemp(name), nullptr);
    path_ = name;
  }
  ~TempDir() {
    for (const std::string& file : files_) ::unlink(file.c_str());
    ::rmdir(path_.c_str());
  }
  std::string file(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// Talks both ways over a Unix stream pair and half-closes. Worker fibers only.
void check_unix_exchange(UnixListener& listener, const std::string& target) {
  tern::Result<UnixStream> client = UnixStream::connect(target, patience());
  ASSERT_TRUE(client) << target << ": " << client.error().message();
  Address peer;
  tern::Result<UnixStream> server = listener.accept(&peer, patience());
  ASSERT_TRUE(server) << server.error().message();
  EXPECT_TRUE(peer.is_unix());
  EXPECT_EQ(peer.to_string(), "unix:");  // the client never bound a name
  EXPECT_EQ(client->peer_address()->to_string(), target);
  EXPECT_EQ(server->local_address()->to_string(), target);

  ASSERT_TRUE(client->write_all(bytes_of("over unix"), patience()));
  ASSERT_TRUE(client->shutdown(SHUT_WR));
  EXPECT_EQ(read_to_end(*server), "over unix");
  ASSERT_TRUE(server->write_all(bytes_of("and back"), patience()));
  server->close();
  EXPECT_EQ(read_to_end(*client), "and back");
  // TCP options do not apply.
  EXPECT_FALSE(client->set_nodelay());
}

TEST(UnixStream, PathInATemporaryDirectory) {
  TempDir dir;
  const std::string target = "unix:" + dir.file("tern.sock");
  run_on(1, [&] {
    tern::Result<Address> address = Address::parse(target);
    ASSERT_TRUE(address);
    tern::Result<UnixListener> listener = UnixListener::bind(*address);
    ASSERT_TRUE(listener) << listener.error().message();
    EXPECT_EQ(*listener->local_address(), *address);
    EXPECT_EQ(listener->local_address()->to_string(), target);
    check_unix_exchange(*listener, target);
    // The path is taken while the file exists.
    tern::Result<UnixListener> again = UnixListener::bind(*address);
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error(), std::errc::address_in_use);
  });
}

TEST(UnixStream, AbstractName) {
  const std::string target = "unix:@tern-net-test-" + std::to_string(::getpid());
  run_on(1, [&] {
    tern::Result<Address> address = Address::parse(target);
    ASSERT_TRUE(address);
    {
      tern::Result<UnixListener> listener = UnixListener::bind(*address);
      ASSERT_TRUE(listener) << listener.error().message();
      EXPECT_EQ(*listener->local_address(), *address);
      EXPECT_EQ(listener->local_address()->to_string(), target);
      check_unix_exchange(*listener, target);
      tern::Result<UnixListener> twice = UnixListener::bind(*address);
      ASSERT_FALSE(twice);
      EXPECT_EQ(twice.error(), std::errc::address_in_use);
    }
    // An abstract name is free again as soon as its listener is closed.
    tern::Result<UnixListener> again = UnixListener::bind(*address);
    ASSERT_TRUE(again) << again.error().message();
  });
}

TEST(UdpSocket, SendToAndReceiveFrom) {
  run_on(1, [] {
    tern::Result<UdpSocket> a = UdpSocket::bind(Address::loopback(0));
    tern::Result<UdpSocket> b = UdpSocket::bind(Address::loopback(0));
    ASSERT_TRUE(a) << a.error().message();
    ASSERT_TRUE(b) << b.error().message();
    const Address a_address = *a->local_address();
    const Address b_address = *b->local_address();
    EXPECT_NE(a_address.port(), 0);
    EXPECT_NE(a_address, b_address);

    tern::Result<std::size_t> n = a->send_to(bytes_of("hello"), b_address, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 5u);
    std::array<std::byte, 64> buf;
    Address from;
    n = b->receive_from(buf, &from, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "hello");
    EXPECT_EQ(from, a_address);

    ASSERT_TRUE(b->send_to(bytes_of("world"), from, patience()));
    n = a->receive_from(buf, nullptr, patience());
    ASSERT_TRUE(n);
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "world");

    // Datagrams keep their boundaries, an empty one included.
    for (const char* message : {"one", "", "three"})
      ASSERT_TRUE(a->send_to(bytes_of(message), b_address, patience()));
    for (const char* message : {"one", "", "three"}) {
      n = b->receive_from(buf, &from, patience());
      ASSERT_TRUE(n) << n.error().message();
      EXPECT_EQ(text_of(std::span(buf).first(*n)), message);
      EXPECT_EQ(from, a_address);
    }

    // A datagram larger than the buffer is truncated; the rest of it is gone.
    const std::string large(100, 'L');
    ASSERT_TRUE(a->send_to(bytes_of(large), b_address, patience()));
    ASSERT_TRUE(a->send_to(bytes_of("next"), b_address, patience()));
    std::array<std::byte, 10> small;
    n = b->receive_from(small, &from, patience());
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, small.size());
    EXPECT_EQ(text_of(small), std::string(10, 'L'));
    n = b->receive_from(buf, &from, patience());
    ASSERT_TRUE(n);
    EXPECT_EQ(text_of(std::span(buf).first(*n)), "next");

    // Nothing to receive: the deadline ends the wait.
    const auto start = Clock::now();
    n = b->receive_from(buf, &from, Clock::now() + 20ms);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_GE(Clock::now() - start, 20ms);

    // And an interrupt ends it too.
    std::error_code result;
    tern::Fiber receiver = tern::spawn([&] { result = error_of(b->receive_from(buf, &from)); });
    tern::this_fiber::yield();
    receiver.interrupt();
    receiver.join();
    EXPECT_EQ(result, std::errc::operation_canceled);
  });
}

// Lowers the soft RLIMIT_NOFILE just above the descriptors in use and opens descriptors until
// none is left below it; closes them and restores the limit when destroyed.
class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0);
    const int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(lowest_free, 0);
    ::close(lowest_free);
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(lowest_free) + 16;
    EXPECT_LE(lowered.rlim_cur, saved_.rlim_cur);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
    for (int i = 0; i < 64; ++i) {  // at most 16 descriptors are free below the limit
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        exhausted_ = errno == EMFILE;
        break;
      }
      fillers_.push_back(fd);
    }
  }
  ~DescriptorsExhausted() {
    for (int fd : fillers_) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  bool exhausted() const { return exhausted_; }

 private:
  rlimit saved_ = {};
  std::vector<int> fillers_;
  bool exhausted_ = false;
};

TEST(TcpListener, OutOfDescriptorsShedsPendingConnectionsAndRecovers) {
  run_on(1, [] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    const Address address = *listener->local_address();
    // Two clients the kernel has connected (in the accept queue) before descriptors run out.
    tern::Result<TcpStream> first = TcpStream::connect(address, patience());
    tern::Result<TcpStream> second = TcpStream::connect(address, patience());
    ASSERT_TRUE(first) << first.error().message();
    ASSERT_TRUE(second) << second.error().message();
    {
      DescriptorsExhausted full;
      ASSERT_TRUE(full.exhausted());
      for (int i = 0; i < 2; ++i) {
        const auto start = Clock::now();
        tern::Result<TcpStream> accepted = listener->accept(patience());
        ASSERT_FALSE(accepted) << "accepted with no descriptor left?";
        EXPECT_EQ(accepted.error(), std::errc::too_many_files_open) << accepted.error().message();
        EXPECT_LT(Clock::now() - start, 5s) << "accept should fail promptly";
      }
      // Each failed accept closed one pending connection: both clients see the connection
      // end (a clean close, or a reset) instead of waiting forever.
      for (tern::Result<TcpStream>* client : {&first, &second}) {
        std::array<std::byte, 8> buf;
        tern::Result<std::size_t> n = (*client)->read(buf, patience());
        if (n) {
          EXPECT_EQ(*n, 0u);
        } else {
          EXPECT_EQ(n.error(), std::errc::connection_reset) << n.error().message();
        }
      }
    }
    // Descriptors are back. Nothing is left pending, and the listener does not spin: an accept
    // with nothing to accept waits for its deadline using next to no CPU.
    const std::chrono::nanoseconds cpu_before = tern_test::thread_cpu_time();
    const auto start = Clock::now();
    tern::Result<TcpStream> idle = listener->accept(Clock::now() + 200ms);
    const std::chrono::nanoseconds cpu_used = tern_test::thread_cpu_time() - cpu_before;
    ASSERT_FALSE(idle) << "a shed connection was still in the accept queue";
    EXPECT_EQ(idle.error(), std::errc::timed_out);
    EXPECT_GE(Clock::now() - start, 200ms);
    EXPECT_LT(cpu_used, 100ms) << "the accept loop spun";

    // The listener serves new clients again.
    tern::Result<TcpStream> third = TcpStream::connect(address, patience());
    ASSERT_TRUE(third) << third.error().message();
    tern::Result<TcpStream> served = listener->accept(patience());
    ASSERT_TRUE(served) << served.error().message();
    ASSERT_TRUE(third->write_all(bytes_of("back"), patience()));
    EXPECT_EQ(read_text(*served, 4), "back");
  });
}

// ---- error messages: each names the operation and the address, and compares as before ----

TEST(Errors, BindingAnAddressInUseNamesIt) {
  run_on(1, [] {
    tern::Result<TcpListener> first = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(first) << first.error().message();
    const Address taken = *first->local_address();
    tern::Result<TcpListener> second = TcpListener::bind(taken);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error(), std::errc::address_in_use);
    EXPECT_EQ(second.error().value(), EADDRINUSE);
    EXPECT_EQ(second.error().message(), "bind " + taken.to_string() + ": Address already in use");
    // Without the context it is the plain errno code.
    EXPECT_EQ(tern::without_context(second.error()),
              std::error_code(EADDRINUSE, std::system_category()));

    tern::Result<UdpSocket> udp = UdpSocket::bind(Address::loopback(0));
    ASSERT_TRUE(udp);
    const Address udp_taken = *udp->local_address();
    tern::Result<UdpSocket> again = UdpSocket::bind(udp_taken);
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error(), std::errc::address_in_use);
    EXPECT_EQ(again.error().message(),
              "bind " + udp_taken.to_string() + ": Address already in use");
  });
}

TEST(Errors, ARefusedConnectNamesTheAddress) {
  run_on(1, [] {
    const Address nobody = Address::loopback(unused_port());
    const auto check = [&](const tern::Result<TcpStream>& client) {
      ASSERT_FALSE(client);
      EXPECT_EQ(client.error(), std::errc::connection_refused);
      EXPECT_EQ(client.error().message(), "connect " + nobody.to_string() + ": Connection refused");
    };
    check(TcpStream::connect(nobody, patience()));
    check(TcpStream::connect(nobody.to_string(), patience()));
  });
}

TEST(Errors, TextThatIsNotAnAddressSaysWhy) {
  run_on(1, [] {
    tern::Result<TcpStream> client = TcpStream::connect("127.0.0.1", patience());
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error(), std::errc::invalid_argument);
    EXPECT_EQ(client.error().message(),
              "'127.0.0.1': missing port (expected host:port or [ipv6]:port)");
    client = TcpStream::connect("127.0.0.1:99999", patience());
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error(), std::errc::invalid_argument);
    EXPECT_EQ(client.error().message(),
              "'127.0.0.1:99999': port '99999' is not a number from 0 to 65535");
  });
}

TEST(Errors, ANameThatDoesNotResolveReadsAsAResolverFailure) {
  run_on(1, [] {
    // The resolver rejects an empty label without asking a DNS server.
    tern::Result<TcpStream> client = TcpStream::connect("no..such..host:80", patience());
    ASSERT_FALSE(client);
    const std::error_code error = client.error();
    EXPECT_EQ(tern::without_context(error).category(), tern::net::resolve_category());
    EXPECT_EQ(error.message(),
              std::string("resolve no..such..host: ") + ::gai_strerror(error.value()));
    EXPECT_NE(error, std::errc::host_unreachable);
    EXPECT_EQ(error.message().find("route"), std::string::npos) << error.message();
  });
}

TEST(Errors, AReadPastItsDeadlineSaysSo) {
  run_on(1, [] {
    tern::Result<tern_test::Connected> pair = tern_test::connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    std::array<std::byte, 8> buf;
    tern::Result<std::size_t> n = pair->client.read(buf, tern::deadline_after(10ms));
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    EXPECT_EQ(n.error().message(), "deadline exceeded");
    pair->client.set_timeout(10ms);
    tern::Result<void> exact = pair->client.read_exact(buf);
    ASSERT_FALSE(exact);
    EXPECT_EQ(exact.error(), std::errc::timed_out);
    EXPECT_EQ(exact.error().message(), "deadline exceeded");
  });
}

}  // namespace
