#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../common/header16.h"
#include "tern/base/result.h"

namespace tern::bench {

// The payloads of the 16-byte-header protocol (report 000, docs/benchmark-methods.md): request
// `syn` carries `size` bytes whose pattern depends on syn (byte i is (syn + i) % 251), so a reply
// that carries another request's payload, a shifted one or a flipped byte is caught. The payloads
// are slices of one buffer: building a request copies nothing. Read-only after construction; any
// thread.
class RequestPattern {
 public:
  explicit RequestPattern(std::size_t payload_size);

  std::size_t payload_size() const noexcept { return size_; }
  // The payload of request `syn`.
  std::span<const std::byte> payload(std::uint32_t syn) const noexcept {
    return std::span(bytes_).subspan(syn % kPeriod, size_);
  }

 private:
  static constexpr std::size_t kPeriod = 251;
  std::size_t size_;
  std::vector<std::byte> bytes_;
};

// The header of request `syn`: len = payload_size, cmd, version 1, syn, and ack = syn (so a
// byte-exact echo of the request is also the correct reply). Any thread.
tools::Header16 request_header(std::uint32_t syn, tools::Command cmd,
                               std::uint32_t payload_size) noexcept;

// Checks a reply (its 16-byte header and its body) to echo request `syn`: len, cmd, ver, syn,
// ack = syn and every payload byte. std::errc::bad_message if anything differs, with `why`
// saying what. Any thread.
Result<void> check_reply(std::span<const std::byte> header, std::span<const std::byte> body,
                         std::uint32_t syn, const RequestPattern& pattern,
                         std::string* why = nullptr);

}  // namespace tern::bench
