#include "client_connection.h"

#include <google/protobuf/message_lite.h>
#include <sys/socket.h>
#include <zstd.h>

#include <fmt/format.h>
#include <algorithm>

#include "cluster.h"
#include "codec.h"
#include "tern/log/log.h"
#include "tern/log/peer_log.h"

namespace tern::rpc::detail {

ClientConnection* Endpoint::ready_connection() noexcept {
  const std::size_t n = connections.size();
  for (std::size_t i = 0; i < n; ++i) {
    ClientConnection* c = connections[(next + i) % n].get();
    if (c->state() == ClientConnection::State::ready) {
      next = (next + i + 1) % n;
      return c;
    }
  }
  return nullptr;
}

bool Endpoint::connecting() const noexcept {
  return std::any_of(connections.begin(), connections.end(), [](const auto& c) {
    return c->state() == ClientConnection::State::connecting;
  });
}

ClientConnection::ClientConnection(Channel::Impl& channel, Endpoint& endpoint, std::size_t index)
    : endpoint_(endpoint),
      channel_(channel),
      input_(stream_, channel.limits, channel.options.frame_read_timeout),
      random_(std::hash<std::string>{}(endpoint.name) ^ (0x9e3779b97f4a7c15ull * (index + 1))) {}

ClientConnection::~ClientConnection() = default;

void ClientConnection::start() {
  manager_ = spawn([this] { manage(); }, {.name = "rpc connection"});
  manager_id_ = manager_.id();
}

void ClientConnection::close(const Status& status) {
  closing_ = true;
  shut_down();
  fail_all(status);
  if (manager_.joinable()) {
    manager_.interrupt();
    manager_.join();
  }
  set_state(State::closed);
}

void ClientConnection::set_state(State state) noexcept {
  state_ = state;
  channel_.state_changed.set();
  for (Event* waiter : channel_.ready_waiters) waiter->set();
  publish_status(channel_);
}

std::chrono::milliseconds ClientConnection::jittered(std::chrono::milliseconds backoff) noexcept {
  random_ ^= random_ << 13;
  random_ ^= random_ >> 7;
  random_ ^= random_ << 17;
  const double unit = static_cast<double>(random_ >> 11) / static_cast<double>(1ull << 53);
  const double factor = 1.0 + channel_.options.reconnect.jitter * (2.0 * unit - 1.0);
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(static_cast<double>(backoff.count()) * factor));
}

void ClientConnection::manage() {
  const net::ConnectorOptions& policy = channel_.options.reconnect;
  std::chrono::milliseconds backoff = policy.initial_backoff;
  while (!closing_) {
    tern::Result<Transport> stream = open_transport();
    if (closing_) break;
    if (!stream) {
      last_error_ = stream.error().message();  // "connect ADDRESS: why" or "resolve NAME: why"
      if (state_ != State::failed) {
        TERN_LOG_DEBUG("rpc: {}; retrying in {} ms", last_error_, backoff.count());
      }
      set_state(State::failed);
      if (!this_fiber::sleep_for(jittered(backoff)) && closing_) break;
      backoff = std::min(
          std::chrono::duration_cast<std::chrono::milliseconds>(backoff * policy.multiplier),
          policy.max_backoff);
      continue;
    }
    stream_ = std::move(*stream);
    const bool told_to_go = serve();
    if (!told_to_go && frames_received_ > 0) {
      backoff = policy.initial_backoff;
      continue;
    }
    // The server said goaway, or closed the connection before it sent anything: the next
    // connection is likely refused or treated the same, so wait as after a failed attempt
    // instead of hammering the server.
    if (!this_fiber::sleep_for(jittered(backoff)) && closing_) break;
    backoff =
        std::min(std::chrono::duration_cast<std::chrono::milliseconds>(backoff * policy.multiplier),
                 policy.max_backoff);
  }
}

tern::Result<Transport> ClientConnection::open_transport() {
  tern::Result<net::TcpStream> tcp = net::TcpStream::connect(
      endpoint_.address, deadline_after(channel_.options.reconnect.attempt_timeout));
  if (!tcp) return fail(tcp.error());
  if (!channel_.tls.is_valid()) return Transport(std::move(*tcp));
  // The name the certificate must carry: the one configured, the target's host, or (an endpoint
  // etcd listed) the address of "address:port".
  std::string server_name = channel_.options.tls_server_name;
  if (server_name.empty()) server_name = endpoint_.server_name;
  if (server_name.empty()) {
    server_name = endpoint_.name.substr(0, endpoint_.name.rfind(':'));
    if (server_name.starts_with('[')) server_name = server_name.substr(1, server_name.size() - 2);
  }
  tern::Result<tls::TlsStream> secured =
      tls::TlsStream::connect(std::move(*tcp), channel_.tls, server_name,
                              deadline_after(channel_.options.tls_handshake_timeout));
  if (!secured) {
    return fail(with_context(
        secured.error(), fmt::format("TLS handshake with {} ({})", endpoint_.name, server_name)));
  }
  return Transport(std::move(*secured));
}

bool ClientConnection::serve() {
  (void)stream_.set_nodelay();
  writer_ = std::make_unique<FrameWriter>(stream_);
  writer_->run_on_demand(*this);
  input_.reset();
  frames_received_ = 0;
  pings_sent_ = 0;
  last_pong_ = 0;
  goaway_last_id_.reset();
  dropped_because_.clear();
  oversized_push_logged_ = false;
  ++channel_.stats.connects;
  set_state(State::ready);
  serving_ = true;
  Fiber pinger;
  if (channel_.options.ping_interval.count() > 0) {
    pinger = spawn([this] { ping_loop(); }, {.name = "rpc ping"});
  }
  std::string reason = "closed by the server";
  for (;;) {
    tern::Result<RawFrame> frame = input_.next();
    if (!frame) {
      const std::error_code error = frame.error();
      if (error.category() == protocol_category()) {
        protocol_error(error, input_.error_detail());
        reason = fmt::format("protocol error: {}", error.message());
      } else if (error == FrameReadErrc::closed_mid_frame) {
        reason = "closed by the server in the middle of a frame";
      } else if (error == FrameReadErrc::frame_timeout) {
        ++channel_.stats.frame_timeouts;
        reason = fmt::format(
            "a frame did not complete within the frame read timeout of {} ms ({} bytes of it came)",
            input_.frame_timeout().count(), input_.buffered());
        TERN_PEER_LOG_WARN("rpc: closing the connection to {}: {}", endpoint_.name, reason);
      } else if (error != FrameReadErrc::closed) {
        reason = error.message();
      }
      break;
    }
    ++frames_received_;
    if (!handle(*frame)) {
      reason = "protocol error";
      break;
    }
  }
  serving_ = false;
  // The read ended because this side shut the socket down (no pong), not the server.
  if (!dropped_because_.empty()) reason = dropped_because_;
  const bool lost = !closing_;
  const bool told_to_go = state_ == State::draining;
  if (lost) {
    ++channel_.stats.connection_losses;
    last_error_ = fmt::format("connection to {} lost: {}", endpoint_.name, reason);
    if (state_ != State::draining) TERN_LOG_INFO("rpc: {}", last_error_);
    set_state(State::failed);
  }
  shut_down();
  Status failure(StatusCode::unavailable, lost ? last_error_ : "the channel was closed");
  fail_all(failure);
  writer_->stop();
  if (pinger.joinable()) {
    pinger.interrupt();
    pinger.join();
  }
  while (!writer_fibers_.wait()) this_fiber::yield();  // even when this fiber is interrupted
  writer_.reset();
  stream_.close();
  return told_to_go;
}

bool ClientConnection::send(PendingCall* call, FrameType type, const wire::Metadata& metadata,
                            const google::protobuf::MessageLite& request, bool compress) {
  if (state_ != State::ready || !writer_ || writer_->failed()) return false;
  const std::uint64_t id = next_id_++;
  if (call != nullptr) {
    call->id = id;
    pending_.insert(id, call);
  }
  append_message_frame(writer_->buffer(), type, id, &metadata, request, compress);
  // With other calls on this connection, requests sent in the same round share one write.
  writer_->flush(pending_.size() <= 1);
  return true;
}

void ClientConnection::forget(PendingCall& call) {
  if (pending_.take(call.id) == nullptr) return;
  if (state_ == State::ready || state_ == State::draining) {
    append_frame(writer_->buffer(), FrameType::cancel, call.id, nullptr, {}, false);
    writer_->wake();
  }
  if (state_ == State::draining && idle()) shut_down();
}

bool ClientConnection::check(Deadline deadline, const std::string& service,
                             const std::string& method) {
  if (state_ != State::ready || !writer_) return false;
  if (service.empty()) {
    const std::uint64_t sent = ++pings_sent_;
    append_frame(writer_->buffer(), FrameType::ping, sent, nullptr, {}, false);
    writer_->wake();
    while (last_pong_ < sent) {
      pong_.reset();
      if (!pong_.wait_until(deadline)) break;
    }
    return last_pong_ >= sent && pings_sent_ >= sent;
  }
  wire::Metadata metadata;
  metadata.set_service(service);
  metadata.set_method(method);
  const auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
  metadata.set_timeout_us(left > 0 ? static_cast<std::uint64_t>(left) : 1);
  PendingCall call;
  if (!send(&call, FrameType::request, metadata, wire::MetadataEntry::default_instance(), false))
    return false;
  while (!call.finished) {
    if (!call.done.wait_until(deadline)) break;
  }
  if (!call.finished) {
    forget(call);
    return false;
  }
  return call.status.ok();
}

void ClientConnection::finish(PendingCall& call, Status status) {
  call.status = std::move(status);
  call.finished = true;
  call.done.set();
  if (call.also != nullptr) call.also->set();
}

void ClientConnection::fail_all(const Status& status) {
  for (PendingCall* call : pending_.take_all()) {
    call->transport_failure = true;
    // After a goaway for a stop the server runs no call past its last_call_id: one still
    // waiting when the connection ends was never run, and may go to another server.
    call->unprocessed = goaway_last_id_ && call->id > *goaway_last_id_;
    finish(*call, status);
  }
  std::unordered_map<std::uint64_t, std::shared_ptr<Stream>> open;
  open.swap(streams_);
  for (auto& [id, stream] : open) stream->fail(status);
}

std::shared_ptr<Stream> ClientConnection::open_stream(const wire::Metadata& metadata,
                                                      Deadline deadline) {
  if (state_ != State::ready || !writer_ || writer_->failed()) return nullptr;
  const std::uint64_t id = next_id_++;
  auto stream = std::make_shared<Stream>(*this, id, true, deadline, channel_.options.stream_window);
  streams_.emplace(id, stream);
  append_frame(writer_->buffer(), FrameType::stream_open, id, &metadata, {}, false);
  stream->start();
  writer_->wake();
  return stream;
}

net::Buffer* ClientConnection::stream_out() noexcept {
  if ((state_ != State::ready && state_ != State::draining) || !writer_ || writer_->failed()) {
    return nullptr;
  }
  return &writer_->buffer();
}

void ClientConnection::stream_flush() noexcept {
  if (writer_) writer_->wake();
}

bool ClientConnection::start_writer() noexcept {
  tern::Result<Fiber> writer = try_spawn(
      [this] {
        (void)writer_->run();  // a failed write leaves failed() set: no new call is sent
        writer_fibers_.done();
      },
      {.name = "rpc writer"});
  if (!writer) {
    // Its frames are dropped: end the connection, whose calls then fail as unavailable.
    TERN_PEER_LOG_WARN("rpc: closing the connection to {}: cannot start its writer fiber: {}",
                       endpoint_.name, writer.error().message());
    dropped_because_ = "no fiber could be started to send its frames";
    shut_down();
    return false;
  }
  writer_fibers_.add();
  writer->detach();
  return true;
}

void ClientConnection::stream_closed(std::uint64_t id) noexcept {
  streams_.erase(id);
  if (state_ == State::draining && idle()) shut_down();
}

bool ClientConnection::handle_stream(const RawFrame& frame) {
  const std::uint64_t id = frame.header.call_id;
  auto found = streams_.find(id);
  if (found == streams_.end()) {
    if (id == 0 || id >= next_id_) {
      protocol_error(make_error_code(ProtocolErrc::unknown_call_id),
                     fmt::format("frame type {} for stream {}; the last id sent was {}",
                                 static_cast<int>(frame.header.type), id, next_id_ - 1));
      return false;
    }
    return true;  // the stream is over on this side (cancelled, deadline): a late frame
  }
  const std::shared_ptr<Stream> stream = found->second;
  switch (frame.header.type) {
    case FrameType::stream_message:
    case FrameType::stream_credit:
      if (std::optional<StreamFrameError> bad = deliver_stream_data(*stream, frame)) {
        protocol_error(bad->code, bad->detail);
        return false;
      }
      return true;
    case FrameType::stream_status:
    case FrameType::stream_reset: {
      if (tern::Result<void> parsed = parse_metadata(frame.metadata, metadata_); !parsed) {
        protocol_error(parsed.error(), fmt::format("stream {}: status metadata", id));
        return false;
      }
      const std::uint32_t raw_code = metadata_.status();
      StatusCode code = raw_code > 0xff ? StatusCode::unknown : static_cast<StatusCode>(raw_code);
      if (frame.header.type == FrameType::stream_reset) {
        stream->on_reset(
            Status(code == StatusCode::ok ? StatusCode::cancelled : code,
                   fmt::format("the server reset the stream: {}", metadata_.status_message())));
      } else {
        stream->on_status(Status(code, metadata_.status_message()));
      }
      return true;
    }
    default:
      return true;
  }
}

bool ClientConnection::handle(const RawFrame& frame) {
  switch (frame.header.type) {
    case FrameType::response:
      return handle_response(frame);
    case FrameType::pong:
      last_pong_ = std::max(last_pong_, frame.header.call_id);
      pong_.set();
      return true;
    case FrameType::ping:
      append_frame(writer_->buffer(), FrameType::pong, frame.header.call_id, nullptr, {}, false);
      writer_->wake();
      return true;
    case FrameType::goaway: {
      if (tern::Result<void> parsed = parse_metadata(frame.metadata, metadata_); !parsed) {
        protocol_error(parsed.error(), "goaway metadata");
        return false;
      }
      TERN_LOG_INFO("rpc: {} sent goaway ({}); new calls go to a new connection", endpoint_.name,
                    metadata_.status_message());
      last_error_ = fmt::format("{} is going away: {}", endpoint_.name, metadata_.status_message());
      if (metadata_.status() == static_cast<std::uint32_t>(StatusCode::unavailable)) {
        goaway_last_id_ = metadata_.last_call_id();
      } else {
        // The server refused a frame (a protocol error; a version-1 server refuses stream
        // frames): the streams end with its reason instead of a bare "connection lost".
        std::unordered_map<std::uint64_t, std::shared_ptr<Stream>> open;
        open.swap(streams_);
        const Status why(StatusCode::unavailable,
                         fmt::format("{} closed the connection: {}", endpoint_.name,
                                     metadata_.status_message()));
        for (auto& [id, stream] : open) stream->fail(why);
      }
      set_state(State::draining);
      if (idle()) shut_down();
      return true;
    }
    case FrameType::push:
      return handle_push(frame);
    case FrameType::stream_message:
    case FrameType::stream_status:
    case FrameType::stream_credit:
    case FrameType::stream_reset:
      return handle_stream(frame);
    case FrameType::request:
    case FrameType::one_way:
    case FrameType::cancel:
    case FrameType::stream_open:
      protocol_error(
          make_error_code(ProtocolErrc::unexpected_frame),
          fmt::format("frame type {} from a server", static_cast<int>(frame.header.type)));
      return false;
  }
  return false;
}

bool ClientConnection::handle_push(const RawFrame& frame) {
  // Nobody would see it: drop it before its metadata is parsed or its body decompressed.
  if (!channel_.options.on_push) {
    ++channel_.stats.dropped_pushes;
    return true;
  }
  const std::uint32_t limit = channel_.options.max_push_size;
  if ((frame.header.flags & kFlagCompressed) == 0 && frame.body.size() > limit) {
    drop_oversized_push(fmt::format("a body of {} bytes", frame.body.size()));
    return true;
  }
  if (tern::Result<void> parsed = parse_metadata(frame.metadata, metadata_); !parsed) {
    protocol_error(parsed.error(), "push metadata");
    return false;
  }
  if ((frame.header.flags & kFlagCompressed) != 0) {
    // Checked against the size the compressed body declares, before anything is allocated.
    const unsigned long long declared =
        ZSTD_getFrameContentSize(frame.body.data(), frame.body.size());
    if (declared != ZSTD_CONTENTSIZE_ERROR && declared != ZSTD_CONTENTSIZE_UNKNOWN &&
        declared > limit) {
      drop_oversized_push(fmt::format("a body that decompresses to {} bytes", declared));
      return true;
    }
  }
  tern::Result<std::span<const std::byte>> body = plain_body(frame, limit, scratch_);
  if (!body) {
    protocol_error(body.error(), "push body");
    return false;
  }
  ++channel_.stats.pushes;
  channel_.options.on_push(metadata_.service(), metadata_.method(), *body);
  release_scratch();
  return true;
}

void ClientConnection::drop_oversized_push(const std::string& what) {
  ++channel_.stats.oversized_pushes;
  // One line per connection: a server that keeps sending them does not flood the log.
  if (!oversized_push_logged_) {
    oversized_push_logged_ = true;
    TERN_PEER_LOG_WARN(
        "rpc: dropped a push from {} with {} (max_push_size {}); later ones are counted "
        "in ChannelStats::oversized_pushes",
        endpoint_.name, what, channel_.options.max_push_size);
  }
}

void ClientConnection::release_scratch() noexcept {
  if (scratch_.capacity() > kScratchKept) std::string().swap(scratch_);
}

bool ClientConnection::handle_response(const RawFrame& frame) {
  const std::uint64_t id = frame.header.call_id;
  PendingCall* found = pending_.take(id);
  if (found == nullptr) {
    if (id == 0 || id >= next_id_) {
      protocol_error(make_error_code(ProtocolErrc::unknown_call_id),
                     fmt::format("reply to call {}; the last call sent was {}", id, next_id_ - 1));
      return false;
    }
    ++channel_.stats.late_replies;  // the caller gave up (deadline or cancel) before it came
    return true;
  }
  PendingCall& call = *found;
  if (tern::Result<void> parsed = parse_metadata(frame.metadata, metadata_); !parsed) {
    finish(call, Status(StatusCode::internal, "the reply's metadata is not valid protobuf"));
    protocol_error(parsed.error(), fmt::format("reply to call {}", id));
    return false;
  }
  if (call.context != nullptr && metadata_.entries_size() > 0) {
    for (const wire::MetadataEntry& entry : metadata_.entries()) {
      call.context->reply_metadata_.emplace_back(entry.key(), entry.value());
    }
  }
  // A code past the 8-bit range is still a failure (unknown), never ok by truncation.
  const std::uint32_t raw_code = metadata_.status();
  const StatusCode code = raw_code > 0xff ? StatusCode::unknown : static_cast<StatusCode>(raw_code);
  if (code != StatusCode::ok) {
    call.unprocessed = code == StatusCode::unavailable && goaway_last_id_ && id > *goaway_last_id_;
    finish(call, Status(code, metadata_.status_message()));
  } else if (call.reply != nullptr) {
    tern::Result<std::span<const std::byte>> body =
        plain_body(frame, channel_.limits.max_frame_size, scratch_);
    if (!body) {
      finish(call, Status(StatusCode::internal, "the reply's body does not decompress"));
      protocol_error(body.error(), fmt::format("reply to call {}", id));
      return false;
    }
    if (!call.reply->ParseFromArray(body->data(), static_cast<int>(body->size()))) {
      finish(call,
             Status(StatusCode::internal, fmt::format("reply of {} bytes is not a valid {}",
                                                      body->size(), call.reply->GetTypeName())));
    } else {
      finish(call, Status());
    }
    release_scratch();
  } else {
    finish(call, Status());
  }
  if (state_ == State::draining && idle()) shut_down();
  return true;
}

void ClientConnection::ping_loop() {
  const auto interval = channel_.options.ping_interval;
  const auto timeout = channel_.options.ping_timeout;
  for (;;) {
    if (!this_fiber::sleep_for(interval)) return;
    if (state_ != State::ready) continue;
    const std::uint64_t sent = ++pings_sent_;
    append_frame(writer_->buffer(), FrameType::ping, sent, nullptr, {}, false);
    writer_->wake();
    if (!this_fiber::sleep_for(timeout)) return;
    if (last_pong_ < sent && state_ == State::ready) {
      TERN_LOG_WARN("rpc: no pong from {} within {} ms; reconnecting", endpoint_.name,
                    timeout.count());
      dropped_because_ = fmt::format("no pong within {} ms", timeout.count());
      shut_down();
      return;
    }
  }
}

void ClientConnection::protocol_error(std::error_code error, const std::string& detail) {
  ++channel_.stats.protocol_errors;
  TERN_PEER_LOG_WARN("rpc: closing the connection to {}: {} ({})", endpoint_.name, error.message(),
                     detail);
}

void ClientConnection::shut_down() noexcept {
  if (!stream_.is_open()) return;
  ::shutdown(stream_.fd(), SHUT_RDWR);
  // The managing fiber reads in serve(); wake it even where a shut-down socket's pending read is
  // not completed by the kernel.
  if (serving_ && !in_manager() && manager_.joinable()) manager_.interrupt();
}

bool ClientConnection::in_manager() const noexcept {
  return manager_.joinable() && this_fiber::id() == manager_id_;
}

}  // namespace tern::rpc::detail
