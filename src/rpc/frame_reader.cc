#include "frame_reader.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace tern::rpc::detail {

namespace {

// How much free space each read offers the kernel.
constexpr std::size_t kReadSize = 16 * 1024;
// A fresh net::Buffer's first allocation.
constexpr std::size_t kInitialCapacity = 16 * 1024;

// What a net::Buffer that starts at kInitialCapacity and doubles allocates to hold `bytes`.
std::size_t buffer_capacity_for(std::size_t bytes) noexcept {
  return std::max(kInitialCapacity, std::bit_ceil(bytes));
}

class FrameReadCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern.rpc.frame_read"; }
  std::string message(int value) const override {
    switch (static_cast<FrameReadErrc>(value)) {
      case FrameReadErrc::closed:
        return "the peer closed the connection";
      case FrameReadErrc::closed_mid_frame:
        return "the peer closed the connection in the middle of a frame";
      case FrameReadErrc::frame_timeout:
        return "the rest of a frame did not arrive within the frame read timeout";
    }
    return "unknown frame read error";
  }
};

}  // namespace

const std::error_category& frame_read_category() noexcept {
  static const FrameReadCategory category;
  return category;
}

tern::Result<RawFrame> FrameReader::next() {
  if (consume_ > 0) {
    in_.consume(consume_);
    consume_ = 0;
  }
  // When the frame whose first bytes are buffered must be complete; none while nothing is.
  Deadline frame_deadline = kNoDeadline;
  for (;;) {
    tern::Result<std::optional<RawFrame>> frame = next_frame(in_.readable(), limits_, &detail_);
    if (!frame) return fail(frame.error());
    if (frame->has_value()) {
      consume_ = (*frame)->size();
      return **frame;
    }
    if (!in_.empty() && frame_timeout_.count() > 0 && frame_deadline == kNoDeadline) {
      frame_deadline = deadline_after(frame_timeout_);
    }
    capacity_ = std::max(capacity_, buffer_capacity_for(in_.size() + kReadSize));
    ++reads_;
    tern::Result<std::size_t> got = stream_.read(in_.writable(kReadSize), frame_deadline);
    if (got) in_.commit(*got);
    if (!got) {
      // Timing out with part of a frame in: the frame deadline (or the stream's own timeout)
      // passed in the middle of a frame.
      if (got.error() == std::errc::timed_out && !in_.empty()) {
        return fail(make_error_code(FrameReadErrc::frame_timeout));
      }
      return fail(got.error());
    }
    if (*got == 0) {
      return fail(
          make_error_code(in_.empty() ? FrameReadErrc::closed : FrameReadErrc::closed_mid_frame));
    }
  }
}

void FrameReader::reset() noexcept {
  in_.clear();
  consume_ = 0;
}

void FrameReader::release() noexcept {
  if (consume_ > 0) {
    in_.consume(consume_);
    consume_ = 0;
  }
  if (retained_size_ == 0 || capacity_ <= retained_size_ || in_.size() > retained_size_ / 2) {
    return;
  }
  // The frame that grew the buffer is done: keep the bytes after it in a buffer of their size.
  net::Buffer smaller(kInitialCapacity);
  if (!in_.empty()) smaller.append(in_.readable());
  in_ = std::move(smaller);
  capacity_ = in_.empty() ? 0 : buffer_capacity_for(in_.size());
}

}  // namespace tern::rpc::detail
