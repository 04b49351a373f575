#include "tern/rpc/stream.h"

#include "stream_core.h"

namespace tern::rpc {

StreamCall::StreamCall(std::shared_ptr<detail::Stream> stream, bool client) noexcept
    : stream_(std::move(stream)), client_(client) {}

StreamCall::StreamCall(StreamCall&&) noexcept = default;

StreamCall& StreamCall::operator=(StreamCall&& other) noexcept {
  if (this != &other) {
    if (client_ && stream_ && stream_->attached()) {
      stream_->cancel(Status(StatusCode::cancelled, "the stream's handle was replaced"));
    }
    stream_ = std::move(other.stream_);
    failure_ = std::move(other.failure_);
    client_ = other.client_;
  }
  return *this;
}

StreamCall::~StreamCall() {
  // A caller that drops its handle before the end abandons the stream: the server stops.
  if (client_ && stream_ && stream_->attached()) {
    stream_->cancel(Status(StatusCode::cancelled, "the client dropped the stream"));
  }
}

Result<bool> StreamCall::read(google::protobuf::MessageLite& message) {
  if (!stream_) return std::unexpected(failure_);
  return stream_->read(message);
}

Status StreamCall::write(const google::protobuf::MessageLite& message) {
  if (!stream_) return failure_;
  return stream_->write(message);
}

Status StreamCall::close_send() {
  if (!stream_) return failure_;
  return stream_->close_send();
}

void StreamCall::cancel() {
  if (stream_) stream_->cancel(Status(StatusCode::cancelled, "the stream was cancelled"));
}

Status StreamCall::finish() {
  if (!stream_) return failure_;
  return stream_->finish();
}

std::size_t StreamCall::buffered_bytes() const noexcept {
  return stream_ ? stream_->buffered_bytes() : 0;
}

std::size_t StreamCall::peak_buffered_bytes() const noexcept {
  return stream_ ? stream_->peak_buffered_bytes() : 0;
}

std::uint64_t StreamCall::write_waits() const noexcept {
  return stream_ ? stream_->write_waits() : 0;
}

}  // namespace tern::rpc
