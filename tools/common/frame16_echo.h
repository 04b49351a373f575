#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
    std::size_t at = 0;
    while (at < bytes.size()) {
      if (body_left_ > 0) {
        const std::size_t piece =
            static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, bytes.size() - at));
        if (echo_body_) add(replies, bytes.data() + at, piece);
        at += piece;
        body_left_ -= piece;
        continue;
      }
      if (bytes.size() - at < kHeader16Size) return {Verdict::more, bytes.size() - at};
      const std::span<std::byte> raw = bytes.subspan(at, kHeader16Size);
      header_ = Header16::load(raw);
      if (header_.len > max_payload_) return {Verdict::oversized, 0};
      const bool echo = header_.cmd == static_cast<std::uint16_t>(Command::echo);
      if (header_.ver != kHeader16Version ||
          (!echo && header_.cmd != static_cast<std::uint16_t>(Command::discard)))
        return {Verdict::bad_header, 0};
      // The header and as much of its payload as this read brought go in one step: one range
      // and one pass of the loop per message, where small pipelined messages arrive whole.
      const std::size_t body = static_cast<std::size_t>(
          std::min<std::uint64_t>(header_.len, bytes.size() - at - kHeader16Size));
      if (echo) {
        store_header16_ack(raw, header_.syn);
        add(replies, raw.data(), kHeader16Size + body);
      }
      echo_body_ = echo;
      body_left_ = header_.len - body;
      at += kHeader16Size + body;
    }
    return {Verdict::more, 0};
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
