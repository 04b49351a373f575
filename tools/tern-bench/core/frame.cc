#include "core/frame.h"

#include <cstring>

#include <fmt/format.h>

namespace tern::bench {

RequestPattern::RequestPattern(std::size_t payload_size)
    : size_(payload_size), bytes_(payload_size + kPeriod) {
  for (std::size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<std::byte>(i % kPeriod);
}

tools::Header16 request_header(std::uint32_t syn, tools::Command cmd,
                               std::uint32_t payload_size) noexcept {
  return tools::Header16{.len = payload_size,
                         .cmd = static_cast<std::uint16_t>(cmd),
                         .ver = tools::kHeader16Version,
                         .syn = syn,
                         .ack = syn};
}

Result<void> check_reply(std::span<const std::byte> header, std::span<const std::byte> body,
                         std::uint32_t syn, const RequestPattern& pattern, std::string* why) {
  const auto bad = [why](std::string message) -> Result<void> {
    if (why != nullptr) *why = std::move(message);
    return fail(std::errc::bad_message);
  };
  if (header.size() != tools::kHeader16Size)
    return bad(fmt::format("reply header of {} bytes, expected 16", header.size()));
  const tools::Header16 h = tools::Header16::load(header);
  if (h.len != pattern.payload_size() || body.size() != pattern.payload_size())
    return bad(fmt::format("reply to syn {} has len {} ({} body bytes), expected {}", syn, h.len,
                           body.size(), pattern.payload_size()));
  if (h.cmd != static_cast<std::uint16_t>(tools::Command::echo) || h.ver != tools::kHeader16Version)
    return bad(
        fmt::format("reply to syn {} has cmd {} ver {}, expected cmd 1 ver 1", syn, h.cmd, h.ver));
  if (h.syn != syn || h.ack != syn)
    return bad(
        fmt::format("reply has syn {} ack {}, expected the reply to syn {}", h.syn, h.ack, syn));
  const std::span<const std::byte> expected = pattern.payload(syn);
  if (std::memcmp(body.data(), expected.data(), expected.size()) != 0) {
    std::size_t at = 0;
    while (at < expected.size() && body[at] == expected[at]) ++at;
    return bad(fmt::format("reply to syn {}: payload byte {} is {:#04x}, expected {:#04x}", syn, at,
                           static_cast<unsigned>(body[at]), static_cast<unsigned>(expected[at])));
  }
  return {};
}

}  // namespace tern::bench
