#pragma once

// Streaming calls (docs/rpc.md, "Streaming"): the untyped StreamCall and the typed handles that
// generated code hands to handlers (ServerReader, ServerWriter, ServerReaderWriter) and returns
// to callers (ClientReader, ClientWriter, ClientReaderWriter). Every operation blocks only the
// calling fiber. A stream belongs to the worker of its connection: use its handles from fibers
// of that worker (a handler's own fiber on the server, the channel's worker on the client).

#include <tern/rpc/server_context.h>
#include <tern/rpc/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace google::protobuf {
class MessageLite;
}

namespace tern::rpc {

class Service;

namespace detail {
class Stream;
}

// One end of a stream, untyped: messages both ways, each side ends its own with end of stream,
// and the server ends the whole with a status. Movable; the typed handles wrap it.
class StreamCall {
 public:
  // A stream that never opened: every operation returns `failure`.
  explicit StreamCall(Status failure) : failure_(std::move(failure)) {}
  // An end of an open stream; a client end (`client`) cancels the stream when it is destroyed
  // before the stream finished.
  StreamCall(std::shared_ptr<detail::Stream> stream, bool client) noexcept;
  StreamCall(StreamCall&&) noexcept;
  StreamCall& operator=(StreamCall&&) noexcept;
  ~StreamCall();

  // Parses the next message into `message` (waits for it): true, or false once the peer ended
  // its side cleanly; a status when the stream failed (cancelled, deadline_exceeded,
  // unavailable when the connection ended, the server's final status on a client).
  [[nodiscard]] Result<bool> read(google::protobuf::MessageLite& message);
  // Sends `message`; parks while the peer's flow-control window is used up.
  [[nodiscard]] Status write(const google::protobuf::MessageLite& message);
  // Ends this side's messages (half-close): the peer reads the rest, then end of stream.
  [[nodiscard]] Status close_send();
  // Abandons the stream: the peer is told (its operations fail with cancelled), this end's fail
  // with cancelled.
  void cancel();
  // Client: ends this side, drops the messages not read and waits for the server's final status.
  [[nodiscard]] Status finish();

  // Bytes received and not read yet (at most the window, plus one message), and the most it
  // held at once; times a write parked for the peer's window.
  std::size_t buffered_bytes() const noexcept;
  std::size_t peak_buffered_bytes() const noexcept;
  std::uint64_t write_waits() const noexcept;

 private:
  std::shared_ptr<detail::Stream> stream_;
  Status failure_;
  bool client_ = false;
};

// The client's messages of a client-streaming method, for its handler. Handler fiber only.
template <typename Request>
class ServerReader {
 public:
  explicit ServerReader(StreamCall& call) noexcept : call_(&call) {}
  // The next request: true, false once the client closed its side, or why the stream failed.
  [[nodiscard]] Result<bool> read(Request& request) { return call_->read(request); }
  // The untyped stream underneath (its counters).
  StreamCall& stream() noexcept { return *call_; }

 private:
  StreamCall* call_;
};

// Where a server-streaming handler sends its replies. Handler fiber only.
template <typename Reply>
class ServerWriter {
 public:
  explicit ServerWriter(StreamCall& call) noexcept : call_(&call) {}
  // Sends a reply; parks while the client's window is full; fails once the stream failed.
  [[nodiscard]] Status write(const Reply& reply) { return call_->write(reply); }
  // The untyped stream underneath (its counters).
  StreamCall& stream() noexcept { return *call_; }

 private:
  StreamCall* call_;
};

// Both directions of a bidirectional method, for its handler. Handler fiber only.
template <typename Request, typename Reply>
class ServerReaderWriter {
 public:
  explicit ServerReaderWriter(StreamCall& call) noexcept : call_(&call) {}
  // The next request: true, false once the client closed its side, or why the stream failed.
  [[nodiscard]] Result<bool> read(Request& request) { return call_->read(request); }
  // Sends a reply; parks while the client's window is full.
  [[nodiscard]] Status write(const Reply& reply) { return call_->write(reply); }
  // The untyped stream underneath (its counters).
  StreamCall& stream() noexcept { return *call_; }

 private:
  StreamCall* call_;
};

// The replies of a server-streaming call. The channel's worker.
template <typename Reply>
class ClientReader {
 public:
  explicit ClientReader(StreamCall call) noexcept : call_(std::move(call)) {}
  // The next reply: true, false after the last one (the status was ok), or the status that
  // ended the stream.
  [[nodiscard]] Result<bool> read(Reply& reply) { return call_.read(reply); }
  // The server's final status (replies not read are dropped).
  [[nodiscard]] Status finish() { return call_.finish(); }
  // Abandons the call; the server sees it cancelled.
  void cancel() { call_.cancel(); }
  StreamCall& stream() noexcept { return call_; }

 private:
  StreamCall call_;
};

// The requests of a client-streaming call and its one reply. The channel's worker.
template <typename Request, typename Reply>
class ClientWriter {
 public:
  explicit ClientWriter(StreamCall call) noexcept : call_(std::move(call)) {}
  // Sends a request; parks while the server's window is full.
  [[nodiscard]] Status write(const Request& request) { return call_.write(request); }
  // Ends the requests and waits for the reply: ok with `reply` filled, or why there is none.
  [[nodiscard]] Status finish(Reply& reply) {
    if (Status closed = call_.close_send(); !closed.ok()) return closed;
    Result<bool> got = call_.read(reply);
    if (!got) return got.error();
    if (Status status = call_.finish(); !status.ok()) return status;
    if (!*got) return Status(StatusCode::internal, "the server ended the stream with no reply");
    return Status();
  }
  // Abandons the call; the server sees it cancelled.
  void cancel() { call_.cancel(); }
  StreamCall& stream() noexcept { return call_; }

 private:
  StreamCall call_;
};

// Both directions of a bidirectional call. The channel's worker (reads and writes may come
// from two fibers of it at once).
template <typename Request, typename Reply>
class ClientReaderWriter {
 public:
  explicit ClientReaderWriter(StreamCall call) noexcept : call_(std::move(call)) {}
  // Sends a request; parks while the server's window is full.
  [[nodiscard]] Status write(const Request& request) { return call_.write(request); }
  // The next reply: true, false after the last one (the status was ok), or the status that
  // ended the stream.
  [[nodiscard]] Result<bool> read(Reply& reply) { return call_.read(reply); }
  // Ends the requests (half-close); replies keep coming.
  [[nodiscard]] Status close_send() { return call_.close_send(); }
  // Ends the requests, drops the replies not read and returns the server's final status.
  [[nodiscard]] Status finish() { return call_.finish(); }
  // Abandons the call; the server sees it cancelled.
  void cancel() { call_.cancel(); }
  StreamCall& stream() noexcept { return call_; }

 private:
  StreamCall call_;
};

// The invokers of streaming methods, for generated code: Handler is the service's member
// function of the method's kind.
template <typename ServiceClass, typename Request, typename Reply,
          Status (ServiceClass::*Handler)(ServerContext&, const Request&, ServerWriter<Reply>&)>
Status invoke_server_streaming(Service& service, ServerContext& context, StreamCall& call) {
  Request request;
  Result<bool> got = call.read(request);
  if (!got) return got.error();
  if (!*got) {
    return Status(StatusCode::invalid_argument, "the stream ended before its request message");
  }
  ServerWriter<Reply> writer(call);
  return (static_cast<ServiceClass&>(service).*Handler)(context, request, writer);
}

template <typename ServiceClass, typename Request, typename Reply,
          Status (ServiceClass::*Handler)(ServerContext&, ServerReader<Request>&, Reply&)>
Status invoke_client_streaming(Service& service, ServerContext& context, StreamCall& call) {
  ServerReader<Request> reader(call);
  Reply reply;
  Status status = (static_cast<ServiceClass&>(service).*Handler)(context, reader, reply);
  if (status.ok()) status = call.write(reply);
  return status;
}

template <typename ServiceClass, typename Request, typename Reply,
          Status (ServiceClass::*Handler)(ServerContext&, ServerReaderWriter<Request, Reply>&)>
Status invoke_bidi_streaming(Service& service, ServerContext& context, StreamCall& call) {
  ServerReaderWriter<Request, Reply> stream(call);
  return (static_cast<ServiceClass&>(service).*Handler)(context, stream);
}

}  // namespace tern::rpc
