#include "frame_writer.h"

#include <utility>

#include "tern/io/io.h"

namespace tern::rpc::detail {

void FrameWriter::flush(bool alone) noexcept {
  if (!idle_) return;  // the writer is running and takes everything appended before it waits
  if (alone && !stopping_ && !pending_.empty()) {
    tern::Result<std::size_t> sent = io::try_send(stream_.fd(), pending_.readable());
    if (sent) pending_.consume(*sent);
    if (pending_.empty()) return;
  }
  wakeup_.set();  // the rest, or a failed send: the writer's own write reports the error
}

tern::Result<void> FrameWriter::run() {
  for (;;) {
    while (pending_.empty()) {
      if (stopping_) return {};
      idle_ = true;
      wakeup_.reset();
      // An interrupted wait (the runtime is stopping) ends the writer like stop().
      if (pending_.empty() && !stopping_ && !wakeup_.wait()) stopping_ = true;
      idle_ = false;
    }
    std::swap(pending_, writing_);
    in_write_ = writing_.size();
    tern::Result<void> written = stream_.write_all(writing_.readable());
    in_write_ = 0;
    writing_.clear();
    if (!written) {
      failed_ = true;
      pending_.clear();
      return written;
    }
  }
}

}  // namespace tern::rpc::detail
