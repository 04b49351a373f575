#include "server_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <google/protobuf/message_lite.h>

#include <fmt/format.h>

#include "codec.h"
#include "metadata_limits.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/fiber/detail/run_next.h"
#include "tern/fiber/detail/waiter.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/log/log.h"
#include "tern/log/peer_log.h"

namespace tern::rpc::detail {

namespace {

// Waits for group even when the waiting fiber is interrupted (the calls end on their own).
void wait_all(WaitGroup& group) {
  while (!group.wait()) this_fiber::yield();
}

// How often a connection that stopped reading (backpressure) checks that its peer is still
// there, so the calls of a peer that reset are cancelled while nothing is read from it.
constexpr std::chrono::milliseconds kPeerCheckInterval{50};

// Frames handled in a row before the reading fiber lets the worker's other fibers run, so a
// peer that pipelines thousands of frames in one read does not hold up the other connections.
constexpr unsigned kFramesPerTurn = 32;

// Per-call bookkeeping beyond the request's bytes (the call, its context and fiber record).
constexpr std::size_t kCallOverhead = 512;

// Whether the kernel has closed the TCP connection (the peer reset it); false for other sockets.
bool peer_reset(int fd) noexcept {
  tcp_info info{};
  socklen_t size = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return false;
  return info.tcpi_state == TCP_CLOSE;
}

// Raises `peak` to `value` if it is below.
void raise_to(std::atomic<std::uint64_t>& peak, std::uint64_t value) noexcept {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (seen < value && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

ServerConnection::ServerConnection(const Server& server, Server::State& state, Transport& stream)
    : server_(server),
      state_(state),
      stream_(stream),
      writer_(stream),
      input_(stream, state.limits, state.options.frame_read_timeout) {
  if (tern::Result<net::Address> peer = stream.peer_address()) peer_address_ = *peer;
  if (tls::TlsStream* tls = stream.tls()) peer_identity_ = tls->peer_identity();
  input_.set_retained_size(state.options.retained_buffer_size);
  writer_.set_retained_size(state.options.retained_buffer_size);
  writer_.set_write_timeout(state.options.write_timeout);
  writer_.run_on_demand(*this);
}

void ServerConnection::serve() {
  // TCP_NODELAY came from the listener (rpc::Server::start sets it there).
  Server::State::WorkerConnections& here = *state_.workers[this_worker::index()];
  here.open.insert(this);
  state_.connections.fetch_add(1, std::memory_order_relaxed);
  if (state_.stopping.load(std::memory_order_acquire)) goaway();

  // This fiber reads the connection itself, and a reply's fiber sends the reply when it can:
  // most connections need no other fiber than this one.
  tern::detail::FiberControl* const self = tern::detail::current_fiber("rpc::Server");
  reading_fiber_ = self;
  read_loop();
  reading_fiber_ = nullptr;
  // A stop_reading() that came while the loop was not waiting leaves its interrupt pending.
  tern::detail::drop_interrupt(self);
  // The calls the loop started last run before the connection closes, as they did when the
  // loop had a fiber of its own: one that answers at once (say, just before a protocol error
  // that its goaway counts it in) still gets its reply out.
  this_fiber::yield();
  fail_streams(Status(StatusCode::unavailable, "the connection closed"));
  if (!closed_) {
    closed_ = true;
    if (!calls_.empty()) {
      state_.cancelled_by_close.fetch_add(calls_.size(), std::memory_order_relaxed);
      calls_.for_each([](ServerCall& call) { call.cancel(); });
    }
  }
  wait_all(call_fibers_);
  writer_.stop();
  wait_all(writer_fibers_);
  here.open.erase(this);
  state_.connections.fetch_sub(1, std::memory_order_relaxed);
  state_.connection_bytes.fetch_sub(reported_bytes_, std::memory_order_relaxed);
}

void ServerConnection::read_loop() {
  unsigned frames = 0;
  std::uint64_t reads = 0;
  while (!reading_stopped_) {
    if (!wait_for_room()) return;
    tern::Result<RawFrame> frame = input_.next();
    if (!frame) {
      read_ended(frame.error());
      return;
    }
    if (!handle(*frame)) return;
    input_.release();
    // Drop the decompression scratch a large body grew.
    if (scratch_.capacity() > state_.options.retained_buffer_size) std::string().swap(scratch_);
    // Frames found already buffered are handled without a read (where the reactor would let
    // the worker's other fibers run): yield after kFramesPerTurn of them in a row.
    if (input_.reads() != reads) {
      reads = input_.reads();
      frames = 0;
    } else if (++frames == kFramesPerTurn) {
      frames = 0;
      this_fiber::yield();
    }
  }
}

bool ServerConnection::wait_for_room() {
  const std::size_t max_calls = state_.options.max_calls_per_connection;
  const std::size_t budget = state_.options.max_connection_memory;
  bool paused = false;
  for (;;) {
    const std::size_t held = held_bytes();
    note_held(held);
    // Streams wait for frames this loop reads: only unary calls, which end on their own, count.
    const bool calls_full = max_calls != 0 && live_calls_ - live_streams_ >= max_calls;
    // Only what the connection can release counts as a reason to wait: a frame larger than
    // the budget is still taken once nothing else is held.
    const bool memory_full = budget != 0 && held > budget && writer_.pending() + calls_bytes_ > 0;
    if (!calls_full && !memory_full) return true;
    if (!paused) {
      paused = true;
      state_.backpressure_pauses.fetch_add(1, std::memory_order_relaxed);
    }
    room_.reset();
    waiting_for_room_ = true;
    writer_.set_progress_event(&room_);
    tern::Result<void> woke = room_.wait_for(kPeerCheckInterval);
    writer_.set_progress_event(nullptr);
    waiting_for_room_ = false;
    if (reading_stopped_ || closed_) return false;
    if (woke) continue;
    if (woke.error() != std::errc::timed_out) return false;  // interrupted
    // Nothing changed for a while: look whether the peer is still there (a reply to a reset
    // peer fails the writer, but calls that do not finish would otherwise run on).
    if (peer_reset(stream_.fd())) {
      TERN_LOG_DEBUG("rpc: {} reset the connection while {} of its calls ran", peer(), live_calls_);
      return false;
    }
  }
}

void ServerConnection::note_held(std::size_t held) noexcept {
  if (held > peak_bytes_) {
    peak_bytes_ = held;
    raise_to(state_.connection_bytes_peak, held);
  }
  if (live_calls_ > peak_calls_) {
    peak_calls_ = live_calls_;
    raise_to(state_.connection_calls_peak, live_calls_);
  }
  const std::size_t step = state_.options.retained_buffer_size;
  if (held > reported_bytes_ + step || held + step < reported_bytes_) {
    state_.connection_bytes.fetch_add(held - reported_bytes_, std::memory_order_relaxed);
    reported_bytes_ = held;
  }
}

void ServerConnection::read_ended(std::error_code error) {
  const std::size_t partial = input_.buffered();
  if (error.category() == protocol_category()) {
    protocol_error(error, input_.error_detail());
  } else if (error == FrameReadErrc::frame_timeout) {
    state_.slow_senders.fetch_add(1, std::memory_order_relaxed);
    TERN_PEER_LOG_WARN(
        "rpc: closing the connection from {}: a frame did not arrive within {} ms ({} bytes of "
        "it came); the client sends too slowly",
        peer(), input_.frame_timeout().count(), partial);
  } else if (error == std::errc::connection_reset && partial > 0) {
    state_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    TERN_PEER_LOG_WARN("rpc: {} reset the connection in the middle of a frame ({} bytes of it)",
                       peer(), partial);
  } else if (error == FrameReadErrc::closed_mid_frame) {
    state_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    TERN_PEER_LOG_WARN("rpc: {} closed the connection in the middle of a frame ({} bytes of it)",
                       peer(), partial);
  } else if (error != FrameReadErrc::closed && !reading_stopped_ &&
             error != std::errc::operation_canceled && error != std::errc::connection_reset) {
    TERN_LOG_DEBUG("rpc: connection from {} failed: {}", peer(), error.message());
  }
}

bool ServerConnection::handle(const RawFrame& frame) {
  switch (frame.header.type) {
    case FrameType::request:
      return start_call(frame, false);
    case FrameType::one_way:
      return start_call(frame, true);
    case FrameType::ping:
      append_frame(writer_.buffer(), FrameType::pong, frame.header.call_id, nullptr, {}, false);
      writer_.wake();
      check_pending();
      return !closed_;
    case FrameType::cancel:
      cancel_call(frame.header.call_id);
      return true;
    case FrameType::stream_open:
      return start_call(frame, false, true);
    case FrameType::stream_message:
    case FrameType::stream_credit:
    case FrameType::stream_reset:
      return route_stream(frame);
    case FrameType::goaway:
      // The client will send no more calls; answer the ones in flight and close.
      draining_ = true;
      close_when_idle();
      return true;
    case FrameType::response:
    case FrameType::push:
    case FrameType::pong:
    case FrameType::stream_status:
      protocol_error(
          make_error_code(ProtocolErrc::unexpected_frame),
          fmt::format("frame type {} from a client", static_cast<int>(frame.header.type)));
      return false;
  }
  return false;
}

void ServerConnection::cancel_call(std::uint64_t id) {
  bool found = false;
  calls_.for_each([&](ServerCall& call) {
    if (call.call_id() == id) {
      call.cancel();
      found = true;
    }
  });
  // A call spawned but not started yet learns of its cancel when it starts.
  if (!found && early_cancels_.size() < starting_) early_cancels_.push_back(id);
}

bool ServerConnection::route_stream(const RawFrame& frame) {
  const std::uint64_t id = frame.header.call_id;
  auto found = streams_.find(id);
  if (found == streams_.end()) {
    if (id == 0 || id > last_call_id_) {
      protocol_error(make_error_code(ProtocolErrc::unknown_call_id),
                     fmt::format("frame type {} for stream {}, which was never opened",
                                 static_cast<int>(frame.header.type), id));
      return false;
    }
    return true;  // the stream is over here (finished, reset or refused): a late frame
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
    case FrameType::stream_reset: {
      if (tern::Result<void> parsed = parse_metadata(frame.metadata, metadata_); !parsed) {
        protocol_error(parsed.error(), fmt::format("stream {}: reset metadata", id));
        return false;
      }
      stream->on_reset(Status(StatusCode::cancelled, fmt::format("the client reset the stream: {}",
                                                                 metadata_.status_message())));
      cancel_call(id);
      return true;
    }
    default:
      return true;
  }
}

void ServerConnection::fail_streams(const Status& why) {
  if (streams_.empty()) return;
  std::unordered_map<std::uint64_t, std::shared_ptr<Stream>> open;
  open.swap(streams_);
  for (auto& [id, stream] : open) stream->fail(why);
}

net::Buffer* ServerConnection::stream_out() noexcept {
  return closed_ || writer_.failed() ? nullptr : &writer_.buffer();
}

void ServerConnection::stream_flush() noexcept {
  writer_.wake();
  check_pending();
}

void ServerConnection::stream_closed(std::uint64_t id) noexcept { streams_.erase(id); }

bool ServerConnection::start_writer() noexcept {
  tern::Result<Fiber> writer = try_spawn(
      [this] {
        if (tern::Result<void> ran = writer_.run(); !ran) writer_failed(ran.error());
        writer_fibers_.done();
      },
      {.name = "rpc writer"});
  if (!writer) {
    // Its frames are dropped: end the connection as after a failed write.
    TERN_PEER_LOG_WARN("rpc: closing the connection from {}: cannot start its writer fiber: {}",
                       peer(), writer.error().message());
    stop_reading();
    return false;
  }
  writer_fibers_.add();
  writer->detach();
  return true;
}

void ServerConnection::finish_stream(std::uint64_t id, const Status& status,
                                     const MetadataEntries& trailers) {
  auto found = streams_.find(id);
  if (found == streams_.end()) return;
  const std::shared_ptr<Stream> stream = found->second;
  stream->send_status(status, trailers);
  streams_.erase(id);
}

Status ServerConnection::push(std::string_view service, std::string_view method,
                              const google::protobuf::MessageLite& message) {
  if (closed_ || writer_.failed()) {
    return Status(StatusCode::unavailable,
                  fmt::format("cannot push to {}: the connection is closed", peer()));
  }
  wire::Metadata metadata;
  metadata.set_service(service.data(), service.size());
  metadata.set_method(method.data(), method.size());
  append_message_frame(writer_.buffer(), FrameType::push, 0, &metadata, message, false);
  state_.pushes.fetch_add(1, std::memory_order_relaxed);
  writer_.wake();
  check_pending();
  return Status();
}

bool ServerConnection::start_call(const RawFrame& frame, bool one_way, bool stream) {
  ServerCall::Start start;
  std::span<const std::byte> body;
  switch (admit_call(frame, one_way, stream, start, body)) {
    case Admission::admitted:
      spawn_call(start, body);
      return true;
    case Admission::answered:
      return true;
    case Admission::close_connection:
      return false;
  }
  return false;
}

ServerConnection::Admission ServerConnection::admit_call(const RawFrame& frame, bool one_way,
                                                         bool stream, ServerCall::Start& start,
                                                         std::span<const std::byte>& body) {
  const std::uint64_t id = frame.header.call_id;
  // Ids only grow on a connection: a stream under an id the connection took before could not be
  // told apart from the earlier call, whose handler may still run after a reset and would end
  // the new stream's bookkeeping with its own, leaving a handler that nothing ends.
  if (stream && id <= last_call_id_) {
    protocol_error(make_error_code(ProtocolErrc::unexpected_frame),
                   fmt::format("stream open for id {}, not above the last call id {} (ids are "
                               "never reused)",
                               id, last_call_id_));
    return Admission::close_connection;
  }
  auto answer = [&](const Status& status) {
    if (stream) {
      wire::Metadata refusal;
      refusal.set_status(static_cast<std::uint32_t>(status.code()));
      refusal.set_status_message(status.message());
      append_stream_frame(writer_.buffer(), FrameType::stream_status, id, 0, &refusal, {});
      writer_.wake();
      check_pending();
    } else if (!one_way) {
      reply_status(id, status);
    }
    return Admission::answered;
  };
  const std::size_t max_entries = state_.options.max_metadata_entries;
  const MetadataShape shape = metadata_shape(frame.metadata, max_entries);
  if (shape.well_formed && (shape.entries > max_entries ||
                            shape.largest_entry > state_.options.max_metadata_entry_size)) {
    if (id > last_call_id_) last_call_id_ = id;
    state_.rejected_calls.fetch_add(1, std::memory_order_relaxed);
    state_.metadata_limit_rejected.fetch_add(1, std::memory_order_relaxed);
    return answer(
        Status(StatusCode::resource_exhausted,
               shape.entries > max_entries
                   ? fmt::format("the request has more than {} metadata entries (the server's "
                                 "max_metadata_entries)",
                                 max_entries)
                   : fmt::format("a metadata entry of the request has {} bytes, over the server's "
                                 "max_metadata_entry_size of {}",
                                 shape.largest_entry, state_.options.max_metadata_entry_size)));
  }
  if (tern::Result<void> parsed = parse_metadata(frame.metadata, metadata_); !parsed) {
    protocol_error(parsed.error(),
                   fmt::format("call {}: {} bytes of metadata", id, frame.metadata.size()));
    return Admission::close_connection;
  }
  const bool refusing = draining_ || state_.stopping.load(std::memory_order_acquire);
  // The goaway goes out before the refusal and names the last call this connection took, so the
  // client knows this call was never run and may send it elsewhere, idempotent or not.
  if (refusing && !draining_) goaway();
  if (id > last_call_id_) last_call_id_ = id;
  if (refusing) {
    state_.rejected_calls.fetch_add(1, std::memory_order_relaxed);
    return answer(Status(StatusCode::unavailable, "the server is shutting down"));
  }
  Service* service = nullptr;
  const Method* method = state_.find(metadata_.service(), metadata_.method(), &service);
  if (method == nullptr) {
    state_.unimplemented_calls.fetch_add(1, std::memory_order_relaxed);
    return answer(Status(
        StatusCode::unimplemented,
        fmt::format("no method {}/{} on this server", metadata_.service(), metadata_.method())));
  }
  if (stream && state_.options.max_calls_per_connection != 0 &&
      live_streams_ >= state_.options.max_calls_per_connection) {
    state_.rejected_calls.fetch_add(1, std::memory_order_relaxed);
    return answer(Status(StatusCode::resource_exhausted,
                         fmt::format("the connection has {} streams open already (the server's "
                                     "max_calls_per_connection)",
                                     live_streams_)));
  }
  if (stream != (method->invoke_stream != nullptr)) {
    state_.unimplemented_calls.fetch_add(1, std::memory_order_relaxed);
    return answer(
        Status(StatusCode::unimplemented,
               stream ? fmt::format("{}/{} is a unary method: call it with a request, not a stream",
                                    metadata_.service(), metadata_.method())
                      : fmt::format("{}/{} is a streaming method: open a stream to call it",
                                    metadata_.service(), metadata_.method())));
  }
  const std::size_t limit = state_.options.max_concurrent_calls;
  if (limit != 0 && state_.in_flight.load(std::memory_order_relaxed) >= limit) {
    state_.rejected_calls.fetch_add(1, std::memory_order_relaxed);
    return answer(Status(StatusCode::resource_exhausted,
                         fmt::format("the server runs {} calls already (its limit)", limit)));
  }
  tern::Result<std::span<const std::byte>> plain =
      plain_body(frame, state_.options.max_decompressed_size, scratch_);
  if (!plain && plain.error() == std::errc::message_size) {
    state_.rejected_calls.fetch_add(1, std::memory_order_relaxed);
    state_.body_limit_rejected.fetch_add(1, std::memory_order_relaxed);
    return answer(Status(StatusCode::resource_exhausted,
                         fmt::format("the compressed request body ({} bytes) decompresses to more "
                                     "than the server's max_decompressed_size of {} bytes",
                                     frame.body.size(), state_.options.max_decompressed_size)));
  }
  if (!plain) {
    protocol_error(plain.error(), fmt::format("call {}: {} byte body", id, frame.body.size()));
    return Admission::close_connection;
  }
  body = *plain;
  start = ServerCall::Start{.service = service,
                            .method = method,
                            .call_id = id,
                            .one_way = one_way,
                            .stream = stream,
                            .compressed = (frame.header.flags & kFlagCompressed) != 0,
                            .deadline = kNoDeadline,
                            .held_bytes = body.size() + kCallOverhead};
  for (const wire::MetadataEntry& entry : metadata_.entries()) {
    start.held_bytes +=
        entry.key().size() + entry.value().size() + sizeof(MetadataEntries::value_type);
  }
  // A stream lives as long as its peer keeps it: what it holds is bounded by its window, not
  // released by waiting, so it does not count toward the memory that pauses reading.
  if (stream) start.held_bytes = 0;
  if (metadata_.timeout_us() != 0) {
    // Unsigned, as on the wire: a count past the clock's range is no deadline, not an overflow.
    start.deadline =
        deadline_after(std::chrono::duration<std::uint64_t, std::micro>(metadata_.timeout_us()));
  }
  return Admission::admitted;
}

void ServerConnection::spawn_call(const ServerCall::Start& start, std::span<const std::byte> body) {
  MetadataEntries entries;
  if (metadata_.entries_size() > 0) {
    entries.reserve(static_cast<std::size_t>(metadata_.entries_size()));
    for (const wire::MetadataEntry& entry : metadata_.entries()) {
      entries.emplace_back(entry.key(), entry.value());
    }
  }
  std::string request(reinterpret_cast<const char*>(body.data()), body.size());
  // A stream takes its frames from now on, before its fiber first runs.
  std::shared_ptr<Stream> stream;
  if (start.stream) {
    stream = std::make_shared<Stream>(*this, start.call_id, false, start.deadline,
                                      state_.options.stream_window);
    streams_.emplace(start.call_id, stream);
    ++live_streams_;
    stream->start();
    state_.streams.fetch_add(1, std::memory_order_relaxed);
  }
  state_.in_flight.fetch_add(1, std::memory_order_relaxed);
  // The call runs as soon as the reading fiber parks, ahead of the other connections' ready fibers,
  // while its request and this connection are in cache; and its stack goes back to the
  // worker's pool before the next call takes one, so with thousands of connections calls reuse
  // a few warm stacks instead of mapping new ones. Only the first call waiting to start: a
  // batch of pipelined requests still starts in order.
  tern::detail::start_spawned_first(starting_ == 0);
  tern::Result<Fiber> call_fiber = try_spawn(
      [this, start, request = std::move(request), entries = std::move(entries), stream]() mutable {
        ServerCall call(*this, server_, start, std::move(request), std::move(entries),
                        std::move(stream));
        calls_.push_back(call);
        --starting_;
        if (std::erase(early_cancels_, start.call_id) > 0) call.cancel();
        if (starting_ == 0) early_cancels_.clear();
        call.run();
        call_ended(call);
      },
      {.name = "rpc call",
       .stack_size = state_.options.handler_stack_size != 0 ? state_.options.handler_stack_size
                                                            : kDefaultStackSize});
  tern::detail::start_spawned_first(false);
  if (!call_fiber) {
    state_.in_flight.fetch_sub(1, std::memory_order_relaxed);
    state_.rejected_calls.fetch_add(1, std::memory_order_relaxed);
    TERN_PEER_LOG_WARN("rpc: cannot start a fiber for call {} from {}: {}", start.call_id, peer(),
                       call_fiber.error().message());
    if (stream) {
      stream->send_status(
          Status(StatusCode::resource_exhausted,
                 "cannot start a fiber for the stream: " + call_fiber.error().message()),
          {});
      streams_.erase(start.call_id);
      --live_streams_;
    } else if (!start.one_way) {
      reply_status(start.call_id,
                   Status(StatusCode::resource_exhausted,
                          "cannot start a fiber for the call: " + call_fiber.error().message()));
    }
    return;
  }
  state_.call_count.fetch_add(1, std::memory_order_relaxed);
  state_.calls.add();
  call_fibers_.add();
  ++live_calls_;
  ++starting_;
  calls_bytes_ += start.held_bytes;
  call_fiber->detach();
}

void ServerConnection::call_ended(ServerCall& call) {
  calls_.remove(call);
  if (call.is_stream()) {
    streams_.erase(call.call_id());
    --live_streams_;
  }
  --live_calls_;
  calls_bytes_ -= call.held_bytes();
  state_.in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (waiting_for_room_) room_.set();
  if (draining_) close_when_idle();
  call_fibers_.done();
  state_.calls.done();
}

void ServerConnection::send_reply(std::uint64_t call_id, const Status& status,
                                  std::span<const std::byte> body,
                                  const MetadataEntries& reply_metadata, bool compress) {
  if (closed_ || writer_.failed()) return;
  const wire::Metadata* metadata = nullptr;
  if (!status.ok() || !reply_metadata.empty()) {
    metadata_.Clear();
    metadata_.set_status(static_cast<std::uint32_t>(status.code()));
    metadata_.set_status_message(status.message());
    for (const auto& [key, value] : reply_metadata) {
      wire::MetadataEntry* entry = metadata_.add_entries();
      entry->set_key(key);
      entry->set_value(value);
    }
    metadata = &metadata_;
  }
  append_frame(writer_.buffer(), FrameType::response, call_id, metadata, body,
               compress && !body.empty());
  // With other calls of this connection running, their replies may join this one in one write.
  writer_.flush(live_calls_ <= 1);
  check_pending();
}

void ServerConnection::check_pending() {
  if (closed_ || writer_.pending() <= state_.options.max_pending_reply_bytes) return;
  state_.slow_readers.fetch_add(1, std::memory_order_relaxed);
  TERN_PEER_LOG_WARN(
      "rpc: closing the connection from {}: {} bytes of frames unsent (limit {}); "
      "the client does not read them",
      peer(), writer_.pending(), state_.options.max_pending_reply_bytes);
  abort_connection();
}

void ServerConnection::writer_failed(std::error_code error) {
  if (closed_) return;
  if (error == std::errc::timed_out) {
    state_.slow_readers.fetch_add(1, std::memory_order_relaxed);
    state_.write_timeouts.fetch_add(1, std::memory_order_relaxed);
    TERN_PEER_LOG_WARN(
        "rpc: closing the connection from {}: no byte could be written for {} ms ({} bytes "
        "unsent); the client does not read",
        peer(), state_.options.write_timeout.count(), writer_.unsent_at_failure());
  } else if (error != std::errc::connection_reset && error != std::errc::broken_pipe) {
    TERN_LOG_DEBUG("rpc: writing to {} failed: {}", peer(), error.message());
  }
  abort_connection();
}

void ServerConnection::abort_connection() {
  closed_ = true;
  // Reset rather than close: the kernel would otherwise keep trickling the frames already
  // queued to a peer that does not read, holding their memory for minutes.
  const linger reset{.l_onoff = 1, .l_linger = 0};
  (void)tern::detail::sys.setsockopt(stream_.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::shutdown(stream_.fd(), SHUT_RDWR);
  fail_streams(Status(StatusCode::unavailable,
                      "the server closed the connection (the client does not read)"));
  if (!calls_.empty()) {
    state_.cancelled_by_close.fetch_add(calls_.size(), std::memory_order_relaxed);
    calls_.for_each([](ServerCall& call) { call.cancel(); });
  }
  stop_reading();
}

void ServerConnection::reply_status(std::uint64_t call_id, const Status& status) {
  send_reply(call_id, status, {}, {}, false);
}

void ServerConnection::protocol_error(std::error_code error, const std::string& detail) {
  state_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
  TERN_PEER_LOG_WARN("rpc: closing the connection from {}: {} ({})", peer(), error.message(),
                     detail);
  wire::Metadata goaway;
  goaway.set_status(static_cast<std::uint32_t>(StatusCode::internal));
  goaway.set_status_message(fmt::format("protocol error: {} ({})", error.message(), detail));
  goaway.set_last_call_id(last_call_id_);
  append_frame(writer_.buffer(), FrameType::goaway, 0, &goaway, {}, false);
  writer_.wake();
  check_pending();
}

void ServerConnection::goaway() {
  if (draining_ && closed_) return;
  if (!draining_) {
    draining_ = true;
    wire::Metadata goaway;
    goaway.set_status(static_cast<std::uint32_t>(StatusCode::unavailable));
    goaway.set_status_message("the server is shutting down");
    goaway.set_last_call_id(last_call_id_);
    append_frame(writer_.buffer(), FrameType::goaway, 0, &goaway, {}, false);
    writer_.wake();
    check_pending();
  }
  close_when_idle();
}

void ServerConnection::close_when_idle() {
  // The connection ends once the replies are out (serve() flushes the writer before it returns).
  if (live_calls_ == 0) stop_reading();
}

void ServerConnection::format_peer() const noexcept {
  peer_ =
      peer_address_.family() == AF_UNSPEC ? std::string("unknown peer") : peer_address_.to_string();
}

void ServerConnection::stop_reading() noexcept {
  if (reading_stopped_) return;
  reading_stopped_ = true;
  // Called on the reading fiber itself, the loop sees the flag before it next waits.
  if (reading_fiber_ != nullptr) tern::detail::interrupt(reading_fiber_);
}

}  // namespace tern::rpc::detail
