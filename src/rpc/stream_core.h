#pragma once

// One end of a stream (docs/rpc-protocol.md, "Streams"): the messages received and not yet read,
// the sender's credit and the receiver's window, half-close, reset and the final status. The
// typed handles of <tern/rpc/stream.h> read and write through it; its connection feeds it the
// frames that arrive. Fibers of the connection's worker.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include "frame.h"
#include "tern/base/clock.h"
#include "tern/fiber/event.h"
#include "tern/net/buffer.h"
#include "tern/rpc/client_context.h"
#include "tern/rpc/status.h"

namespace google::protobuf {
class MessageLite;
}

namespace tern::rpc::detail {

// Every stream starts with this much credit in each direction; a receiver with a larger window
// grants the rest in a stream_credit frame as the stream opens.
inline constexpr std::uint32_t kInitialStreamWindow = 64u << 10;

// What a stream needs of its connection. Fibers of the connection's worker.
class StreamPort {
 public:
  // Where to append the stream's frames; nullptr when the connection can no longer send.
  virtual net::Buffer* stream_out() noexcept = 0;
  // Frames were appended: send them.
  virtual void stream_flush() noexcept = 0;
  // The stream ended on this side: the connection forgets it (later frames of it are dropped).
  virtual void stream_closed(std::uint64_t id) noexcept = 0;

 protected:
  ~StreamPort() = default;
};

class Stream {
 public:
  // A stream `id` on `port`; `window` is what this end lets its peer send ahead of its reads
  // (at least kInitialStreamWindow).
  Stream(StreamPort& port, std::uint64_t id, bool client, Deadline deadline, std::uint32_t window);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Grants the part of the window past the initial credit (right after the stream opened).
  void start();

  // The handles' side.
  // The next message parsed into `message`: true, or false once the peer ended its side
  // cleanly; a status when the stream failed (reset, deadline, lost connection, the server's
  // final status when it is not ok, a message that does not parse).
  Result<bool> read(google::protobuf::MessageLite& message);
  // Sends `message`; parks while the peer's window is used up.
  Status write(const google::protobuf::MessageLite& message);
  // Ends this side's messages (end_stream); the peer's read returns false after the rest.
  Status close_send();
  // Abandons the stream: tells the peer (stream_reset) and fails this end's operations with `why`.
  void cancel(const Status& why);
  // Client: closes the sending side, drops unread messages and returns the final status.
  Status finish();
  // Server: sends the final status (with `trailers`) and ends the stream; nothing when it is
  // already over (reset, or the connection is gone).
  void send_status(const Status& status, const MetadataEntries& trailers);

  // The connection's side.
  // A stream_message frame's body (never compressed) or, with `end`, the peer's end_stream.
  void on_message(std::span<const std::byte> body, bool end);
  void on_credit(std::uint32_t bytes);
  void on_status(Status status);
  void on_reset(Status why);
  // The connection ended: every operation fails with `why`; nothing more is sent.
  void fail(const Status& why);

  std::uint64_t id() const noexcept { return id_; }
  // Whether the stream still has its connection (not reset, finished or failed).
  bool attached() const noexcept { return port_ != nullptr; }
  // Bytes received and not read yet; and the most it held at once.
  std::size_t buffered_bytes() const noexcept { return queued_bytes_; }
  std::size_t peak_buffered_bytes() const noexcept { return peak_queued_bytes_; }
  // Times a write parked for credit.
  std::uint64_t write_waits() const noexcept { return write_waits_; }
  std::uint32_t window() const noexcept { return window_; }

 private:
  // Waits on `event` until the deadline; a status when the wait failed (deadline, interrupt).
  std::optional<Status> wait(Event& event);
  // The deadline passed: the client resets the stream, the server fails its operations (its
  // final status tells the client).
  Status expire();
  // A message of `size` bytes was read: grants credit back once enough was.
  void consumed(std::size_t size);
  void detach() noexcept;
  void wake() noexcept;

  StreamPort* port_;
  std::uint64_t id_;
  bool client_;
  Deadline deadline_;
  std::uint32_t window_;
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;
  std::size_t peak_queued_bytes_ = 0;
  bool peer_done_ = false;       // the peer ended its side (end_stream, or the final status)
  Status peer_status_;           // client: the server's final status
  std::optional<Status> error_;  // the stream failed: every operation returns this
  bool send_closed_ = false;     // this side sent end_stream (or its final status)
  std::int64_t send_credit_ = kInitialStreamWindow;   // bytes this side may still send
  std::int64_t receive_left_ = kInitialStreamWindow;  // bytes the peer may still send
  std::size_t ungranted_ = 0;                         // bytes read and not yet granted back
  std::uint64_t write_waits_ = 0;
  Event readable_;
  Event writable_;
};

// Why a stream's data frame was malformed: the protocol error to close the connection with.
struct StreamFrameError {
  std::error_code code;
  std::string detail;
};

// Hands a stream_message or stream_credit frame to `stream`; a compressed message or a credit
// frame that is not 4 bytes long is not applied and returns its protocol error instead. Either
// side's connection fiber.
std::optional<StreamFrameError> deliver_stream_data(Stream& stream, const RawFrame& frame);

}  // namespace tern::rpc::detail
