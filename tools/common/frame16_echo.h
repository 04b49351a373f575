#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "header16.h"

namespace tern::tools {

// The server side of the 16-byte-header protocol (report 000) as a filter over a connection's
// bytes, read by read: it patches each echo request's header in place (ack = syn, the reply is
// otherwise the request) and lists the bytes to write back, a payload in as many pieces as it
// arrives in; discarded messages are skipped. Only an incomplete header waits for the next read,
// so a server can read into its whole buffer every time, as a byte echo does. One per connection,
// used by that connection's fiber (or thread).
class Frame16Echo {
 public:
  enum class Verdict {
    more,        // everything so far is valid: read again
    oversized,   // a header announced a payload over the limit
    bad_header,  // a header with an unknown version or command
  };
  struct Step {
    Verdict verdict = Verdict::more;
    std::size_t kept = 0;  // bytes at the end of the input that start a header (at most 15)
  };

  explicit Frame16Echo(std::size_t max_payload) noexcept : max_payload_(max_payload) {}

  // Takes `bytes`: the bytes kept by the previous call, then those read since. Appends to
  // `replies` the ranges of `bytes` to write back, in order (adjacent ranges merged), up to the
  // first invalid header if there is one; the caller keeps the last `kept` bytes for the next
  // call. After a verdict other than `more`, header() is the offending header.
  Step take(std::span<std::byte> bytes, std::vector<iovec>& replies) {
    std::byte* const data = bytes.data();
    const std::size_t size = bytes.size();
    // The bytes to send back so far, [run_from, run_end): one range while echo messages follow
    // one another, listed only when a discarded message, an invalid header or the end breaks it.
    std::size_t run_from = 0;
    std::size_t run_end = 0;
    std::size_t at = 0;
    if (body_left_ > 0) {  // the rest of a payload that began in an earlier read
      const std::size_t piece = static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, size));
      if (echo_body_) run_end = piece;
      at = piece;
      body_left_ -= piece;
    }
    Step step;
    while (at < size) {
      if (size - at < kHeader16Size) {
        step.kept = size - at;
        break;
      }
      // Only the fields that decide go to registers; the whole header is stored for header()
      // when it is invalid.
      std::byte* const raw = data + at;
      const std::uint32_t len = header16_detail::load<std::uint32_t>(raw);
      const std::uint16_t cmd = header16_detail::load<std::uint16_t>(raw + 4);
      const std::uint16_t ver = header16_detail::load<std::uint16_t>(raw + 6);
      const bool echo = cmd == static_cast<std::uint16_t>(Command::echo);
      if (len > max_payload_ || ver != kHeader16Version ||
          (!echo && cmd != static_cast<std::uint16_t>(Command::discard))) [[unlikely]] {
        header_ = Header16::load(std::span<const std::byte>(raw, kHeader16Size));
        step.verdict = len > max_payload_ ? Verdict::oversized : Verdict::bad_header;
        break;
      }
      // The header and as much of its payload as this read brought go in one step: one pass of
      // the loop per message, where small pipelined messages arrive whole.
      const std::size_t body = std::min<std::size_t>(len, size - at - kHeader16Size);
      if (echo) {
        // ack = syn: the same four big-endian bytes.
        std::memcpy(raw + kHeader16AckOffset, raw + 8, 4);
        if (run_end != at) {
          if (run_end > run_from) add(replies, data + run_from, run_end - run_from);
          run_from = at;
        }
        run_end = at + kHeader16Size + body;
      }
      echo_body_ = echo;
      body_left_ = len - body;
      at += kHeader16Size + body;
    }
    if (run_end > run_from) add(replies, data + run_from, run_end - run_from);
    return step;
  }

  // The last header read. Any time.
  const Header16& header() const noexcept { return header_; }

 private:
  static void add(std::vector<iovec>& replies, std::byte* from, std::size_t size) {
    if (!replies.empty() &&
        static_cast<std::byte*>(replies.back().iov_base) + replies.back().iov_len == from) {
      replies.back().iov_len += size;
    } else {
      replies.push_back({from, size});
    }
  }

  std::size_t max_payload_;
  std::uint64_t body_left_ = 0;  // payload bytes of the current message still to come
  bool echo_body_ = false;       // whether they go back (echo) or are dropped (discard)
  Header16 header_;
};

}  // namespace tern::tools
