#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "frame.h"
#include "frame_reader.h"
#include "frame_writer.h"
#include "metadata.pb.h"
#include "server_call.h"
#include "server_state.h"
#include "stream_core.h"
#include "tern/base/intrusive_list.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/address.h"
#include "transport.h"

namespace tern::rpc::detail {

// The server side of one connection: its reading loop parses frames and starts a fiber per call;
// calls hand their replies back here, and a writer fiber, started when one is needed, sends what
// they could not. Fibers of the connection's worker.
class ServerConnection final : public StreamPort, WriterStarter {
 public:
  ServerConnection(const Server& server, Server::State& state, Transport& stream);

  // Serves the connection until the peer closes it, a protocol error, or the server stops; then
  // waits for its calls to finish. The TcpServer handler's body.
  void serve();
  // Tells the client to send no more calls; the connection closes once its calls are answered.
  void goaway();
  // Queues the reply of a finished call.
  void send_reply(std::uint64_t call_id, const Status& status, std::span<const std::byte> body,
                  const MetadataEntries& reply_metadata, bool compress);
  // A call fiber ended.
  void call_ended(ServerCall& call);
  // Sends the final status of stream `id` (unless it was reset or the connection closed).
  void finish_stream(std::uint64_t id, const Status& status, const MetadataEntries& trailers);
  // Queues a push frame to the client; unavailable once the connection is closed.
  Status push(std::string_view service, std::string_view method,
              const google::protobuf::MessageLite& message);

  // StreamPort.
  net::Buffer* stream_out() noexcept override;
  void stream_flush() noexcept override;
  void stream_closed(std::uint64_t id) noexcept override;

  // WriterStarter.
  bool start_writer() noexcept override;

  // The client's address as text ("127.0.0.1:51234"), formatted on first use (most connections
  // never log one). Fibers of the connection's worker.
  const std::string& peer() const noexcept {
    if (peer_.empty()) format_peer();
    return peer_;
  }
  // The client's certificate on a TLS connection, else nullptr.
  const tls::PeerIdentity* peer_identity() const noexcept {
    return peer_identity_ ? &*peer_identity_ : nullptr;
  }
  const bool* closed_flag() const noexcept { return &closed_; }

 private:
  // Reads and handles frames until the stream ends or the connection must close.
  void read_loop();
  // Backpressure: waits while the connection runs max_calls_per_connection calls or holds more
  // than max_connection_memory that it can release; false when the connection must end (the
  // reading loop was stopped or the peer reset the connection meanwhile).
  bool wait_for_room();
  // Bytes the connection holds now (read buffer, scratch, unsent frames, calls' requests).
  std::size_t held_bytes() const noexcept {
    return input_.held() + scratch_.capacity() + writer_.pending() + calls_bytes_;
  }
  // Records `held` in the server's gauges when it moved enough (plain arithmetic otherwise).
  void note_held(std::size_t held) noexcept;
  // The writer fiber stopped early (the peer does not read, or the write failed).
  void writer_failed(std::error_code error);
  // Cuts the connection at once: resets it (the kernel drops what it queued), cancels its
  // calls and ends the reading loop.
  void abort_connection();
  // Checks the frames just queued against max_pending_reply_bytes; cuts the connection past it.
  void check_pending();
  // Reports, logs and counts why reading ended (the FrameReader's error).
  void read_ended(std::error_code error);
  // Handles one frame; false when the connection must close.
  bool handle(const RawFrame& frame);
  // Hands a frame of an open stream to it (frames of streams already over are dropped); false
  // when the connection must close.
  bool route_stream(const RawFrame& frame);
  // Cancels the running call `id` (a cancel frame, or a stream's reset).
  void cancel_call(std::uint64_t id);
  // Fails every open stream with `why` (the connection ends).
  void fail_streams(const Status& why);
  // What admit_call decided about a request frame.
  enum class Admission {
    admitted,          // start and body describe a call to spawn
    answered,          // refused with a status (sent unless one-way); the connection goes on
    close_connection,  // a protocol error (already reported): the connection must close
  };
  // Admits (request or one-way) or refuses a call, then spawns it; false when the connection
  // must close.
  bool start_call(const RawFrame& frame, bool one_way, bool stream = false);
  // Admission of a call frame: parses its metadata into metadata_, refuses it while draining,
  // for an unknown method or past max_concurrent_calls, decodes its body (into `body`, valid
  // until the frame is consumed) and fills `start` with the method and deadline.
  Admission admit_call(const RawFrame& frame, bool one_way, bool stream, ServerCall::Start& start,
                       std::span<const std::byte>& body);
  // Starts the fiber of an admitted call (its metadata entries are still in metadata_); without
  // memory for its stack the call is refused with resource_exhausted instead.
  void spawn_call(const ServerCall::Start& start, std::span<const std::byte> body);
  void reply_status(std::uint64_t call_id, const Status& status);
  void protocol_error(std::error_code error, const std::string& detail);
  void close_when_idle();
  // Ends the reading loop (now if it waits for bytes, else at its next wait).
  void stop_reading() noexcept;
  // Fills peer_ from peer_address_.
  void format_peer() const noexcept;

  // What every call reads or writes comes first and together (the references, the counters
  // and flags, the call list, then the writer's and reader's hot fields and the metadata the
  // request is parsed into): with thousands of connections a connection is rarely in cache, and
  // each line it spans is a miss. What only connecting, streams, errors and closing use is last.
  const Server& server_;
  Server::State& state_;
  Transport& stream_;
  std::uint64_t last_call_id_ = 0;
  std::size_t live_calls_ = 0;      // calls spawned and not ended
  std::size_t live_streams_ = 0;    // of those, streams (they never pause reading)
  std::size_t starting_ = 0;        // of those, calls whose fiber has not run yet
  std::size_t calls_bytes_ = 0;     // their held_bytes, summed
  std::size_t reported_bytes_ = 0;  // what this connection adds to state_.connection_bytes
  std::size_t peak_bytes_ = 0;      // the most held_bytes() seen here
  std::size_t peak_calls_ = 0;      // the most live_calls_ seen here
  bool waiting_for_room_ = false;
  bool draining_ = false;
  bool closed_ = false;
  bool reading_stopped_ = false;
  IntrusiveList<ServerCall, &ServerCall::hook> calls_;
  std::vector<std::uint64_t> early_cancels_;  // cancels that came for them (at most starting_)
  WaitGroup call_fibers_;
  std::string scratch_;
  FrameWriter writer_;
  FrameReader input_;
  wire::Metadata metadata_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Stream>> streams_;  // open streams by id
  Event room_;                 // set when calls end or bytes are written, while waited on
  WaitGroup writer_fibers_;    // the writer's fiber while it runs (and one ending)
  net::Address peer_address_;  // AF_UNSPEC when the socket could not tell
  mutable std::string peer_;   // peer_address_ as text, once asked for
  std::optional<tls::PeerIdentity> peer_identity_;
  tern::detail::FiberControl* reading_fiber_ = nullptr;  // the fiber in read_loop(), if any
};

}  // namespace tern::rpc::detail
