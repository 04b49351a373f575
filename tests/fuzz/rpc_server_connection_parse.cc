#include "rpc_server_connection_parse.h"

#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "chunk_splitter.h"
#include "metadata.pb.h"
#include "require.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "tern/base/clock.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/address.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"
#include "tern/rpc/server.h"
#include "tern/rpc/server_context.h"
#include "tern/rpc/service.h"
#include "tern/rpc/stream.h"

namespace tern::fuzz {

namespace {

using namespace std::chrono_literals;
namespace detail = rpc::detail;
namespace wire = rpc::wire;

constexpr const char* kTarget = "rpc_server_connection";

// How long the server may take to answer the probe call or to close a connection; far more than
// it needs, so only a server that stopped serving breaks it.
constexpr std::chrono::seconds kPatience{5};
// How long the attacking connection reads the server's frames after its half-close.
constexpr std::chrono::seconds kReadBackTime{2};

rpc::Status echo(rpc::Service&, rpc::ServerContext&, rpc::UnaryCall& call) {
  wire::Metadata message;
  const std::span<const std::byte> body = call.request();
  if (!message.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return rpc::invalid_request("tern.rpc.wire.Metadata", body.size());
  }
  call.reply(message);
  return {};
}

rpc::Status hold(rpc::Service&, rpc::ServerContext& context, rpc::UnaryCall& call) {
  const Deadline limit = deadline_after(100ms);
  while (!context.cancelled() && Clock::now() < limit) {
    if (!this_fiber::sleep_for(1ms)) break;
  }
  call.reply(wire::Metadata());
  return {};
}

// Echoes every message of a stream until the client ends its side.
rpc::Status stream_echo(rpc::Service&, rpc::ServerContext&, rpc::StreamCall& call) {
  wire::Metadata message;
  for (;;) {
    rpc::Result<bool> got = call.read(message);
    if (!got) return got.error();
    if (!*got) return {};
    if (rpc::Status sent = call.write(message); !sent.ok()) return sent;
  }
}

class FuzzService final : public rpc::Service {
 public:
  std::string_view service_name() const noexcept override { return kFuzzService; }
  std::span<const rpc::Method> methods() const noexcept override { return kMethods; }

 private:
  static constexpr rpc::Method kMethods[] = {{kEchoMethod, echo, nullptr},
                                             {kHoldMethod, hold, nullptr},
                                             {kStreamMethod, nullptr, stream_echo}};
};

// Small limits, so inputs of a few KiB reach them.
rpc::ServerOptions fuzz_server_options() {
  rpc::ServerOptions options;
  options.max_frame_size = 64u << 10;
  options.max_metadata_size = 8u << 10;
  options.max_pending_reply_bytes = 256u << 10;
  options.frame_read_timeout = 1s;
  options.max_decompressed_size = 64u << 10;
  options.max_connection_memory = 16u << 10;
  options.max_calls_per_connection = 8;
  options.max_metadata_entries = 64;
  options.max_metadata_entry_size = 1u << 10;
  options.retained_buffer_size = 16u << 10;
  options.write_timeout = 2s;
  return options;
}

// The most one connection may hold under fuzz_server_options(): the server stops reading once it
// holds more than its budget, so at most one more frame comes in, with its decompressed body, and
// the slack of one read (16 KiB) and of buffer growth.
std::size_t connection_memory_bound(const rpc::ServerOptions& options) {
  return options.max_connection_memory + options.max_frame_size + options.max_decompressed_size +
         (64u << 10);
}

// A frame read back from the server, its metadata parsed.
struct FrameIn {
  detail::FrameHeader header;
  wire::Metadata metadata;
  std::string body;
};

// Reads whole frames from a connection. Fibers of the fuzz server's worker.
class FrameInput {
 public:
  // The next frame; nullopt when the stream ended or failed (or the deadline passed). Aborts
  // when the server sent bytes that are not a frame of the protocol.
  std::optional<FrameIn> next(net::TcpStream& stream, Deadline deadline) {
    for (;;) {
      Result<std::optional<detail::RawFrame>> found =
          detail::next_frame(in_.readable(), detail::Limits{});
      require(found.has_value(), kTarget, "the server sent bytes that are not a frame");
      if (found->has_value()) {
        const detail::RawFrame& raw = **found;
        FrameIn frame;
        frame.header = raw.header;
        require(detail::parse_metadata(raw.metadata, frame.metadata).has_value(), kTarget,
                "the server sent a frame whose metadata does not parse");
        frame.body.assign(reinterpret_cast<const char*>(raw.body.data()), raw.body.size());
        in_.consume(raw.size());
        return frame;
      }
      Result<std::size_t> got = in_.read_from(stream, deadline);
      if (!got || *got == 0) return std::nullopt;
    }
  }

  void clear() noexcept { in_.clear(); }

 private:
  net::Buffer in_;
};

// The fuzz server, its runtime thread, and the probe connection that checks it still serves.
class Harness {
 public:
  // The one harness of the process, started on first use and stopped at exit.
  static Harness& get() {
    static Harness* harness = [] {
      auto* started = new Harness();
      std::atexit([] { get().stop(); });
      return started;
    }();
    return *harness;
  }

  ServerConnectionOutcome run(std::span<const std::byte> input) {
    std::promise<ServerConnectionOutcome> done;
    std::future<ServerConnectionOutcome> outcome = done.get_future();
    Result<void> posted = runtime_->post(0, [&] { done.set_value(attack(input)); });
    require(posted.has_value(), kTarget, "the fuzz server's runtime is not running");
    return outcome.get();
  }

 private:
  Harness() {
    std::promise<void> ready;
    std::future<void> started = ready.get_future();
    thread_ = std::thread([this, &ready] { serve(ready); });
    started.get();
  }

  void serve(std::promise<void>& ready) {
    Runtime runtime({.workers = 1});
    runtime.run([&] {
      FuzzService service;
      rpc::Server server(options_);
      require(server.add_service(service).has_value(), kTarget, "add_service failed");
      Result<net::Address> bound = server.start(net::Address::loopback(0));
      require(bound.has_value(), kTarget, "the server did not start on 127.0.0.1:0");
      address_ = *bound;
      server_ = &server;
      runtime_ = &runtime;
      ready.set_value();
      while (!stopping_.is_set()) (void)stopping_.wait();
      probe_.close();
      (void)server.stop(deadline_after(1s));  // the calls it cut short do not matter at exit
    });
  }

  void stop() {
    stopping_.set();
    if (thread_.joinable()) thread_.join();
  }

  // Runs one input on a fiber of the server's worker.
  ServerConnectionOutcome attack(std::span<const std::byte> input) {
    ServerConnectionOutcome outcome;
    const std::uint8_t control = input.empty() ? 0 : static_cast<std::uint8_t>(input[0]);
    const std::span<const std::byte> bytes = input.empty() ? input : input.subspan(1);

    Result<net::TcpStream> stream = net::TcpStream::connect(address_, deadline_after(kPatience));
    require(stream.has_value(), kTarget, "cannot connect to the fuzz server");
    ChunkSplitter split(control & kChunkMask);
    for (std::size_t at = 0; at < bytes.size();) {
      const std::size_t size = split.next(bytes.size() - at);
      // A server that closed the connection or stopped reading (backpressure) ends the writes.
      if (!stream->write_all(bytes.subspan(at, size), deadline_after(kReadBackTime))) break;
      at += size;
    }
    if ((control & kReadBack) != 0) {
      (void)stream->shutdown(SHUT_WR);  // a failure only means the server has closed already
      FrameInput frames;
      const Deadline until = deadline_after(kReadBackTime);
      for (;;) {
        std::optional<FrameIn> frame = frames.next(*stream, until);
        if (!frame) {
          outcome.closed = Clock::now() < until;
          break;
        }
        switch (frame->header.type) {
          case detail::FrameType::response:
            ++outcome.responses;
            if (frame->metadata.status() == 0) ++outcome.ok_responses;
            break;
          case detail::FrameType::pong:
            ++outcome.pongs;
            break;
          case detail::FrameType::goaway:
            outcome.goaway = true;
            break;
          case detail::FrameType::stream_message:
            ++outcome.stream_messages;
            break;
          case detail::FrameType::stream_status:
            if (frame->metadata.status() == 0) ++outcome.ok_stream_statuses;
            break;
          case detail::FrameType::stream_credit:
          case detail::FrameType::stream_reset:
            break;
          default:
            require(false, kTarget, "the server sent a frame a server never sends");
        }
      }
    }
    if ((control & kReset) != 0) {
      const linger reset{.l_onoff = 1, .l_linger = 0};
      (void)::setsockopt(stream->fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    }
    stream->close();

    check_still_serving();
    // The attacked connection is gone once the server has seen its end: only the probe's stays.
    const Deadline closed_by = deadline_after(kPatience);
    while (server_->stats().connections > 1) {
      require(Clock::now() < closed_by, kTarget,
              "the server kept a connection open after its peer closed it");
      (void)this_fiber::sleep_for(1ms);
    }
    outcome.connection_bytes_peak = check_memory();
    return outcome;
  }

  // A well-formed call on the probe connection must be answered, and rightly.
  void check_still_serving() {
    if (!probe_.is_open()) {
      Result<net::TcpStream> stream = net::TcpStream::connect(address_, deadline_after(kPatience));
      require(stream.has_value(), kTarget, "cannot connect the probe to the fuzz server");
      probe_ = std::move(*stream);
      probe_input_.clear();
    }
    const std::uint64_t id = ++probe_calls_;
    wire::Metadata call;
    call.set_service(std::string(kFuzzService));
    call.set_method(std::string(kEchoMethod));
    wire::Metadata request;
    request.set_status_message("probe " + std::to_string(id));
    std::string body;
    require(request.SerializeToString(&body), kTarget, "cannot encode the probe");
    net::Buffer out;
    detail::append_frame(out, detail::FrameType::request, id, &call, detail::as_bytes(body), false);
    require(probe_.write_all(out.readable(), deadline_after(kPatience)).has_value(), kTarget,
            "the server does not read the probe connection");
    const Deadline answered_by = deadline_after(kPatience);
    for (;;) {
      std::optional<FrameIn> frame = probe_input_.next(probe_, answered_by);
      require(frame.has_value(), kTarget, "the server did not answer a well-formed call");
      if (frame->header.type != detail::FrameType::response) continue;
      require(frame->header.call_id == id, kTarget, "the probe's reply has another call id");
      require(frame->metadata.status() == 0, kTarget, "the probe call failed");
      wire::Metadata reply;
      require(
          reply.ParseFromString(frame->body) && reply.status_message() == request.status_message(),
          kTarget, "the probe's reply is not its request");
      return;
    }
  }

  // No connection held more than its budget allows at any time; the most one held.
  std::uint64_t check_memory() {
    const rpc::ServerStats stats = server_->stats();
    if (stats.connection_bytes_peak > connection_memory_bound(options_)) {
      std::fprintf(stderr, "%s: a connection held %llu bytes (bound %zu)\n", kTarget,
                   static_cast<unsigned long long>(stats.connection_bytes_peak),
                   connection_memory_bound(options_));
      require(false, kTarget, "a connection held more memory than its budget and one frame");
    }
    return stats.connection_bytes_peak;
  }

  const rpc::ServerOptions options_ = fuzz_server_options();
  std::thread thread_;
  Event stopping_;
  Runtime* runtime_ = nullptr;
  rpc::Server* server_ = nullptr;
  net::Address address_;
  // Used only on the server's worker.
  net::TcpStream probe_;
  FrameInput probe_input_;
  std::uint64_t probe_calls_ = 0;
};

}  // namespace

ServerConnectionOutcome run_server_connection(std::span<const std::byte> input) {
  return Harness::get().run(input);
}

}  // namespace tern::fuzz
