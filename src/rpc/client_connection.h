#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "breaker.h"
#include "frame.h"
#include "frame_reader.h"
#include "frame_writer.h"
#include "hedging.h"
#include "metadata.pb.h"
#include "pending_calls.h"
#include "retry_budget.h"
#include "stream_core.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/address.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/client_context.h"
#include "tern/rpc/status.h"
#include "transport.h"

namespace tern::rpc::detail {

class ClientConnection;

// A call waiting for its reply; lives on the calling fiber's stack.
struct PendingCall {
  std::uint64_t id = 0;
  google::protobuf::MessageLite* reply = nullptr;
  ClientContext* context = nullptr;
  Event done;
  Status status;
  bool finished = false;
  bool cancelled = false;
  bool transport_failure = false;  // the connection failed before a reply: safe to retry
  bool unprocessed = false;  // refused after the server's goaway: never run, safe to send again
  Event* also = nullptr;     // set too when the call finishes (a hedged call waits on two calls)
};

// A server a channel talks to, with its pool of connections. What every call touches (the
// name a context reports, the load counters) comes first, on one cache line: with thousands of
// channels an endpoint is rarely in cache when its next call comes.
struct alignas(64) Endpoint {
  std::string name;  // "127.0.0.1:5000"
  // Load and outcome of the calls sent to it (ChannelOptions::breaker, least_loaded).
  std::uint32_t in_flight = 0;
  std::uint64_t calls = 0;
  net::Address address;
  std::vector<std::unique_ptr<ClientConnection>> connections;
  std::size_t next = 0;  // round robin over the pool
  std::uint32_t weight = 1;
  std::string zone;
  MetadataEntries metadata;
  std::string server_name;  // its target's host: the name a TLS server's certificate must carry
  double latency_ewma_ms = 0;
  Breaker breaker;
  // Active health checks (ChannelOptions::health_check).
  bool healthy = true;
  unsigned checks_failed = 0;  // in a row
  unsigned checks_passed = 0;  // in a row
  Fiber checker;

  // A connection ready for calls, or nullptr.
  ClientConnection* ready_connection() noexcept;
  // Whether some connection is still making its first attempt.
  bool connecting() const noexcept;
};

}  // namespace tern::rpc::detail

namespace tern::rpc {

// What a Channel's connections and calls share. Fibers of the channel's worker. What every call
// reads or counts comes first, on one cache line: with thousands of channels a channel is rarely
// in cache when its next call comes.
struct alignas(64) Channel::Impl {
  std::vector<std::unique_ptr<detail::Endpoint>> endpoints;
  // The channel's connection when it has exactly one (one endpoint, a pool of one): calls pick
  // it without walking the endpoint list.
  detail::ClientConnection* only_connection = nullptr;
  bool closing = false;
  bool authorizes = false;  // authorization is set
  ChannelStats stats;       // its first counters share that line
  ChannelOptions options;
  detail::Limits limits;
  tls::TlsContext tls;        // a client context when the connections speak TLS
  std::string authorization;  // "Bearer <ChannelOptions::bearer_token>", or empty
  std::vector<std::pair<std::uint64_t, std::size_t>> ring;  // consistent hash: point, endpoint
  std::size_t next_endpoint = 0;
  Event state_changed;  // set whenever a connection becomes ready or fails
  // The events of wait-for-ready calls waiting for a connection; each is set, like
  // state_changed, whenever a connection changes state (ClientContext::set_wait_for_ready).
  std::vector<Event*> ready_waiters;
  WaitGroup async_calls;
  // An etcd:// or dns:// target's naming fiber changes `endpoints` (naming.h); the endpoints it
  // drops wait in `retired` until their calls have finished, then the reaper closes them.
  std::vector<std::unique_ptr<detail::Endpoint>> retired;
  Fiber naming;
  Fiber reaper;
  Event retired_changed;
  detail::RetryBudget retry_budget;
  detail::LatencyWindow latencies;               // of successful attempts, for hedging's percentile
  std::uint64_t random = 0x9e3779b97f4a7c15ull;  // least_loaded's choice of two
  std::uint64_t status_id = 0;                   // its number in /status (0: not listed)
  Clock::time_point status_published{};
  std::size_t owner_worker = 0;
};

}  // namespace tern::rpc

namespace tern::rpc::detail {

// One connection of a channel to an endpoint: a managing fiber connects (with backoff), reads
// replies and fails the calls in flight when the connection breaks, then connects again. A call
// sends its request from its own fiber when it can; a writer fiber runs only while frames wait
// for the socket or can be batched (FrameWriter::run_on_demand). Fibers of the channel's worker.
class ClientConnection final : public StreamPort, WriterStarter {
 public:
  enum class State { connecting, ready, draining, failed, closed };

  ClientConnection(Channel::Impl& channel, Endpoint& endpoint, std::size_t index);
  ~ClientConnection();

  // Starts the managing fiber.
  void start();
  // Stops reconnecting, fails the calls in flight with `status` and waits for the fibers.
  void close(const Status& status);

  State state() const noexcept { return state_; }
  const std::string& last_error() const noexcept { return last_error_; }
  Endpoint& endpoint() noexcept { return endpoint_; }
  // Whether no call waits for a reply and no stream is open on this connection.
  bool idle() const noexcept { return pending_.empty() && streams_.empty(); }

  // Sends a request (or a one-way call when `call` is null); false if the connection is not
  // ready. A request's call is registered for its reply.
  bool send(PendingCall* call, FrameType type, const wire::Metadata& metadata,
            const google::protobuf::MessageLite& request, bool compress);
  // Stops waiting for call's reply (deadline or cancellation) and tells the server.
  void forget(PendingCall& call);
  // A health check on this connection: a ping answered by a pong, or (with `service` set) a
  // call of service/method with an empty request answered ok, before `deadline`.
  bool check(Deadline deadline, const std::string& service, const std::string& method);
  // Opens a stream (metadata names the method); nullptr if the connection is not ready.
  std::shared_ptr<Stream> open_stream(const wire::Metadata& metadata, Deadline deadline);

  // StreamPort.
  net::Buffer* stream_out() noexcept override;
  void stream_flush() noexcept override;
  void stream_closed(std::uint64_t id) noexcept override;

  // WriterStarter.
  bool start_writer() noexcept override;

 private:
  void manage();
  // Connects to the endpoint and, for a TLS endpoint, runs the handshake; an error's message
  // says which step failed and why (OpenSSL's reason for a refused certificate).
  tern::Result<Transport> open_transport();
  // Serves a connected stream until it fails; true when the server had sent goaway.
  bool serve();
  bool handle(const RawFrame& frame);
  bool handle_response(const RawFrame& frame);
  bool handle_push(const RawFrame& frame);
  bool handle_stream(const RawFrame& frame);
  void drop_oversized_push(const std::string& what);
  // Frees the decompression buffer once a large body is done with, so it does not stay held.
  void release_scratch() noexcept;
  void fail_all(const Status& status);
  void finish(PendingCall& call, Status status);
  void ping_loop();
  void set_state(State state) noexcept;
  void protocol_error(std::error_code error, const std::string& detail);
  void shut_down() noexcept;
  bool in_manager() const noexcept;
  std::chrono::milliseconds jittered(std::chrono::milliseconds backoff) noexcept;

  // What every call reads or writes comes first, on one cache line (after the two vtable
  // pointers): with thousands of connections a connection is rarely in cache.
  State state_ = State::connecting;
  bool serving_ = false;
  bool closing_ = false;
  std::unique_ptr<FrameWriter> writer_;  // of the current connection
  PendingCalls pending_;
  std::uint64_t next_id_ = 1;
  std::uint64_t frames_received_ = 0;  // on the current connection
  Endpoint& endpoint_;
  Channel::Impl& channel_;
  Transport stream_;
  FrameReader input_;  // reads stream_ (declared after it)
  wire::Metadata metadata_;
  // The largest decompression buffer kept between frames.
  static constexpr std::size_t kScratchKept = 256u << 10;

  std::string scratch_;
  WaitGroup writer_fibers_;  // the writer's fiber while it runs (and one ending)
  std::unordered_map<std::uint64_t, std::shared_ptr<Stream>> streams_;  // open streams by id
  // After the server's goaway for a stop: the last call it took; it runs none after it.
  std::optional<std::uint64_t> goaway_last_id_;
  std::uint64_t pings_sent_ = 0;  // on the current connection
  std::uint64_t last_pong_ = 0;   // the highest ping id answered on it
  Event pong_;                    // set on every pong (health checks wait on it)
  std::string last_error_;
  std::string dropped_because_;  // why this side dropped the current connection, if it did
  std::uint64_t random_;
  Fiber manager_;
  std::uint64_t manager_id_ = 0;
  bool oversized_push_logged_ = false;  // on the current connection
};

}  // namespace tern::rpc::detail
