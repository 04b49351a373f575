#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "frame.h"
#include "frame_writer.h"
#include "metadata.pb.h"
#include "server_call.h"
#include "server_state.h"
#include "tern/base/intrusive_list.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"

namespace tern::rpc::detail {

// The server side of one connection: its reading loop parses frames and starts a fiber per call;
// calls hand their replies back here. Fibers of the connection's worker.
class ServerConnection {
 public:
  ServerConnection(const Server& server, Server::State& state, net::TcpStream& stream);

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

  const std::string& peer() const noexcept { return peer_; }
  const bool* closed_flag() const noexcept { return &closed_; }

 private:
  // Reads and handles frames until the stream ends or the connection must close.
  void read_loop();
  // Logs and counts why reading ended (got is the failed or empty read).
  void read_ended(const tern::Result<std::size_t>& got, std::chrono::milliseconds frame_timeout);
  // Handles one frame; false when the connection must close.
  bool handle(const RawFrame& frame);
  bool start_call(const RawFrame& frame, bool one_way);
  void reply_status(std::uint64_t call_id, const Status& status);
  void protocol_error(std::error_code error, const std::string& detail);
  void close_when_idle();
  // Ends the reading loop (now if it waits for bytes, else at its next wait).
  void stop_reading() noexcept;

  const Server& server_;
  Server::State& state_;
  net::TcpStream& stream_;
  FrameWriter writer_;
  net::Buffer in_;
  wire::Metadata metadata_;
  std::string scratch_;
  std::string peer_;
  IntrusiveList<ServerCall, &ServerCall::hook> calls_;
  WaitGroup call_fibers_;
  std::uint64_t last_call_id_ = 0;
  bool draining_ = false;
  bool closed_ = false;
  bool reading_stopped_ = false;
  Fiber reader_;
};

}  // namespace tern::rpc::detail
