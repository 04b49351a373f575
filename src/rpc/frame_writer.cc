#include "frame_writer.h"

#include <utility>

namespace tern::rpc::detail {

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
