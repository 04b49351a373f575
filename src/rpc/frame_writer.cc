#include "frame_writer.h"

#include <utility>

namespace tern::rpc::detail {

namespace {

// The worker's spare send buffer. A writer that runs on demand and sent everything from the
// calling fiber gives its buffer up, and the next one to append takes the spare: with thousands
// of connections, replies are written through a buffer still in cache instead of each
// connection's own, long gone cold (and an idle connection holds no send buffer).
thread_local net::Buffer spare_buffer;
thread_local bool spare_full = false;

}  // namespace

void FrameWriter::take_spare() noexcept {
  lent_ = false;
  if (spare_full) {
    pending_ = std::move(spare_buffer);
    spare_full = false;
  }
}

void FrameWriter::give_up_buffer() noexcept {
  if (spare_full) {
    pending_ = net::Buffer();
  } else {
    spare_buffer = std::move(pending_);
    spare_full = true;
  }
  lent_ = true;
}

void FrameWriter::flush(bool alone) noexcept {
  if (!idle_) return;  // the writer is running and takes everything appended before it waits
  if (alone && !stopping_ && !pending_.empty()) {
    const std::size_t size = pending_.size();
    tern::Result<std::size_t> sent = stream_.try_send(pending_.readable());
    if (sent) pending_.consume(*sent);
    if (drained()) {
      if (retained_size_ != 0 && size > retained_size_) {
        pending_ = net::Buffer();
      } else if (starter_ != nullptr) {
        give_up_buffer();
      }
      return;
    }
  }
  resume();  // the rest, or a failed send: the writer's own write reports the error
}

void FrameWriter::resume() noexcept {
  if (starter_ == nullptr) {
    wakeup_.set();
    return;
  }
  idle_ = false;
  if (starter_->start_writer()) return;
  // No fiber to send them: the frames are dropped as after a failed write.
  unsent_at_failure_ = pending();
  failed_ = true;
  pending_.clear();
}

tern::Result<void> FrameWriter::write_all(std::span<const std::byte> bytes) {
  if (write_timeout_.count() == 0) return stream_.write_all(bytes);
  while (!bytes.empty()) {
    // The timeout counts from the last progress: a slow reader that takes bytes is not cut.
    tern::Result<std::size_t> sent = stream_.write(bytes, deadline_after(write_timeout_));
    if (!sent) return fail(sent.error());
    bytes = bytes.subspan(*sent);
    in_write_ = bytes.size();
    if (progress_ != nullptr) progress_->set();
  }
  return {};
}

tern::Result<void> FrameWriter::flush_stream() {
  // pending() counts these bytes through stream_.unsent() until they are sent.
  tern::Result<void> sent =
      stream_.flush(write_timeout_.count() == 0 ? kNoDeadline : deadline_after(write_timeout_));
  if (progress_ != nullptr) progress_->set();
  return sent;
}

tern::Result<void> FrameWriter::run() {
  for (;;) {
    while (drained()) {
      if (starter_ != nullptr) {
        idle_ = true;  // the next frame starts another writer
        return {};
      }
      if (stopping_) return {};
      idle_ = true;
      wakeup_.reset();
      // An interrupted wait (the runtime is stopping) ends the writer like stop().
      if (drained() && !stopping_ && !wakeup_.wait()) stopping_ = true;
      idle_ = false;
    }
    if (pending_.empty()) {
      // Only records a reply's fiber encrypted and the socket did not take (TLS).
      if (tern::Result<void> sent = flush_stream(); !sent) {
        unsent_at_failure_ = pending();
        failed_ = true;
        return fail(sent.error());
      }
      continue;
    }
    std::swap(pending_, writing_);
    const std::size_t size = writing_.size();
    in_write_ = size;
    tern::Result<void> written = write_all(writing_.readable());
    if (!written) unsent_at_failure_ = pending();
    if (retained_size_ != 0 && size > retained_size_) writing_ = net::Buffer();
    in_write_ = 0;
    writing_.clear();
    if (progress_ != nullptr) progress_->set();
    if (!written) {
      failed_ = true;
      pending_.clear();
      return written;
    }
  }
}

}  // namespace tern::rpc::detail
