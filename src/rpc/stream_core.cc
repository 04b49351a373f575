#include "stream_core.h"

#include <google/protobuf/message_lite.h>

#include <fmt/format.h>
#include <algorithm>

#include "codec.h"
#include "metadata.pb.h"
#include "tern/net/buffer.h"

namespace tern::rpc::detail {

namespace {

// Appends a stream_credit frame granting `bytes`.
void append_credit(net::Buffer& out, std::uint64_t id, std::uint32_t bytes) {
  std::byte body[4];
  net::store_big_endian(body, 4, bytes);
  append_stream_frame(out, FrameType::stream_credit, id, 0, nullptr, body);
}

}  // namespace

Stream::Stream(StreamPort& port, std::uint64_t id, bool client, Deadline deadline,
               std::uint32_t window)
    : port_(&port),
      id_(id),
      client_(client),
      deadline_(deadline),
      window_(std::max(window, kInitialStreamWindow)) {}

void Stream::start() {
  if (window_ == kInitialStreamWindow || port_ == nullptr) return;
  net::Buffer* out = port_->stream_out();
  if (out == nullptr) return;
  append_credit(*out, id_, window_ - kInitialStreamWindow);
  receive_left_ = window_;
  port_->stream_flush();
}

std::optional<Status> Stream::wait(Event& event) {
  tern::Result<void> woke = event.wait_until(deadline_);
  if (woke) return std::nullopt;
  if (woke.error() == std::errc::timed_out || Clock::now() >= deadline_) return expire();
  Status why(StatusCode::cancelled, "the stream's fiber was interrupted");
  cancel(why);
  return why;
}

Status Stream::expire() {
  Status why(StatusCode::deadline_exceeded, "the stream's deadline passed");
  if (client_) {
    cancel(why);
  } else if (!error_) {
    error_ = why;
  }
  return *error_;
}

Result<bool> Stream::read(google::protobuf::MessageLite& message) {
  for (;;) {
    if (error_) return std::unexpected(*error_);
    if (!queue_.empty()) {
      std::string body = std::move(queue_.front());
      queue_.pop_front();
      const std::size_t size = body.size();
      queued_bytes_ -= size;
      consumed(size);
      if (!message.ParseFromString(body)) {
        Status why(client_ ? StatusCode::internal : StatusCode::invalid_argument,
                   fmt::format("a stream message of {} bytes is not a valid {}", size,
                               message.GetTypeName()));
        cancel(why);
        return std::unexpected(why);
      }
      return true;
    }
    if (peer_done_) {
      if (peer_status_.ok()) return false;
      return std::unexpected(peer_status_);
    }
    if (deadline_ != kNoDeadline && Clock::now() >= deadline_) return std::unexpected(expire());
    readable_.reset();
    if (std::optional<Status> failed = wait(readable_)) return std::unexpected(*failed);
  }
}

Status Stream::write(const google::protobuf::MessageLite& message) {
  for (;;) {
    if (error_) return *error_;
    if (client_ && peer_done_) {
      return peer_status_.ok()
                 ? Status(StatusCode::failed_precondition, "the server already ended the stream")
                 : peer_status_;
    }
    if (send_closed_) {
      return Status(StatusCode::failed_precondition, "write after the stream's side was closed");
    }
    if (send_credit_ > 0) break;
    if (deadline_ != kNoDeadline && Clock::now() >= deadline_) return expire();
    ++write_waits_;
    writable_.reset();
    if (std::optional<Status> failed = wait(writable_)) return *failed;
  }
  net::Buffer* out = port_ != nullptr ? port_->stream_out() : nullptr;
  if (out == nullptr) return Status(StatusCode::unavailable, "the stream's connection is closed");
  // A message may overdraw the credit left: a message larger than the window still goes out.
  send_credit_ -= static_cast<std::int64_t>(append_stream_message(*out, id_, message));
  port_->stream_flush();
  return Status();
}

Status Stream::close_send() {
  if (error_) return *error_;
  if (send_closed_ || port_ == nullptr) return Status();
  send_closed_ = true;
  net::Buffer* out = port_->stream_out();
  if (out == nullptr) return Status(StatusCode::unavailable, "the stream's connection is closed");
  append_stream_frame(*out, FrameType::stream_message, id_, kFlagEndStream, nullptr, {});
  port_->stream_flush();
  return Status();
}

void Stream::cancel(const Status& why) {
  if (!error_) error_ = why;
  if (port_ == nullptr) {
    wake();
    return;
  }
  if (net::Buffer* out = port_->stream_out()) {
    wire::Metadata metadata;
    metadata.set_status(static_cast<std::uint32_t>(why.code()));
    metadata.set_status_message(why.message());
    append_stream_frame(*out, FrameType::stream_reset, id_, 0, &metadata, {});
    port_->stream_flush();
  }
  detach();
  wake();
}

Status Stream::finish() {
  (void)close_send();
  for (;;) {
    if (error_) return *error_;
    while (!queue_.empty()) {
      const std::size_t size = queue_.front().size();
      queue_.pop_front();
      queued_bytes_ -= size;
      consumed(size);
    }
    if (peer_done_) return peer_status_;
    if (deadline_ != kNoDeadline && Clock::now() >= deadline_) return expire();
    readable_.reset();
    if (std::optional<Status> failed = wait(readable_)) return *failed;
  }
}

void Stream::send_status(const Status& status, const MetadataEntries& trailers) {
  if (port_ == nullptr) return;
  if (net::Buffer* out = port_->stream_out()) {
    wire::Metadata metadata;
    if (!status.ok()) {
      metadata.set_status(static_cast<std::uint32_t>(status.code()));
      metadata.set_status_message(status.message());
    }
    for (const auto& [key, value] : trailers) {
      wire::MetadataEntry* entry = metadata.add_entries();
      entry->set_key(key);
      entry->set_value(value);
    }
    append_stream_frame(*out, FrameType::stream_status, id_, 0, &metadata, {});
    port_->stream_flush();
  }
  send_closed_ = true;
  detach();
}

void Stream::consumed(std::size_t size) {
  if (peer_done_ || port_ == nullptr) return;
  ungranted_ += size;
  if (ungranted_ < window_ / 4) return;
  net::Buffer* out = port_->stream_out();
  if (out == nullptr) return;
  append_credit(*out, id_, static_cast<std::uint32_t>(ungranted_));
  receive_left_ += static_cast<std::int64_t>(ungranted_);
  ungranted_ = 0;
  port_->stream_flush();
}

void Stream::on_message(std::span<const std::byte> body, bool end) {
  if (peer_done_ || error_) return;  // late: the stream is over on this side
  if (end) {
    peer_done_ = true;
    readable_.set();
    return;
  }
  if (receive_left_ <= 0) {
    cancel(Status(
        StatusCode::resource_exhausted,
        fmt::format("the peer sent past the stream's flow-control window of {} bytes", window_)));
    return;
  }
  receive_left_ -= static_cast<std::int64_t>(body.size());
  queue_.emplace_back(reinterpret_cast<const char*>(body.data()), body.size());
  queued_bytes_ += body.size();
  peak_queued_bytes_ = std::max(peak_queued_bytes_, queued_bytes_);
  readable_.set();
}

void Stream::on_credit(std::uint32_t bytes) {
  send_credit_ += bytes;
  writable_.set();
}

void Stream::on_status(Status status) {
  if (peer_done_ || error_) return;
  peer_done_ = true;
  peer_status_ = std::move(status);
  send_closed_ = true;
  detach();
  wake();
}

void Stream::on_reset(Status why) {
  if (!error_) error_ = std::move(why);
  detach();
  wake();
}

void Stream::fail(const Status& why) {
  port_ = nullptr;
  if (!error_ && !(client_ && peer_done_)) error_ = why;
  wake();
}

void Stream::detach() noexcept {
  if (port_ == nullptr) return;
  StreamPort* port = port_;
  port_ = nullptr;
  port->stream_closed(id_);
}

void Stream::wake() noexcept {
  readable_.set();
  writable_.set();
}

std::optional<StreamFrameError> deliver_stream_data(Stream& stream, const RawFrame& frame) {
  const std::uint64_t id = frame.header.call_id;
  if (frame.header.type == FrameType::stream_message) {
    if ((frame.header.flags & kFlagCompressed) != 0) {
      return StreamFrameError{make_error_code(ProtocolErrc::bad_compression),
                              fmt::format("stream {}: stream messages are never compressed", id)};
    }
    stream.on_message(frame.body, (frame.header.flags & kFlagEndStream) != 0);
    return std::nullopt;
  }
  if (frame.body.size() != 4) {
    return StreamFrameError{
        make_error_code(ProtocolErrc::unexpected_frame),
        fmt::format("stream {}: a credit frame of {} bytes, not 4", id, frame.body.size())};
  }
  stream.on_credit(static_cast<std::uint32_t>(net::load_big_endian(frame.body.data(), 4)));
  return std::nullopt;
}

}  // namespace tern::rpc::detail
