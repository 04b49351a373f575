// Writes the seed corpus of header16_fuzz (tests/fuzz/corpus/header16) into the directory given.
// Each seed is two control bytes (read sizes, payload limit / 4; see header16_parse.h) and a
// stream of 16-byte-header messages; its name says how the stream ends.
// The checked-in seeds were made with: header16_seeds tests/fuzz/corpus/header16
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "header16.h"
#include "seed_files.h"

namespace {

using tern::tools::Header16;

constexpr auto kEcho = static_cast<std::uint16_t>(tern::tools::Command::echo);
constexpr auto kDiscard = static_cast<std::uint16_t>(tern::tools::Command::discard);

// One message: `header`, its len set to the payload's size, then the payload.
std::string message(Header16 header, std::string_view payload) {
  header.len = static_cast<std::uint32_t>(payload.size());
  std::array<std::byte, tern::tools::kHeader16Size> bytes;
  header.store(bytes);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) +
         std::string(payload);
}

// An echo header alone, announcing `len` payload bytes.
std::string header_only(std::uint32_t len) {
  std::array<std::byte, tern::tools::kHeader16Size> bytes;
  Header16{.len = len, .cmd = kEcho, .syn = 1}.store(bytes);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// The control bytes: reads of 1 to `max_read` bytes (0: one read), a limit of 4 * `limit` bytes.
std::string control(std::uint8_t max_read, std::uint8_t limit) {
  return std::string{static_cast<char>(max_read), static_cast<char>(limit)};
}

std::string pipeline() {
  std::string out;
  for (std::uint32_t i = 0; i < 8; ++i) {
    const std::uint16_t cmd = i % 3 == 2 ? kDiscard : kEcho;
    out += message({.cmd = cmd, .syn = 100 + i}, std::string(i * 13, static_cast<char>('a' + i)));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string hello = message({.cmd = kEcho, .syn = 7}, "hello");
  const std::vector<tern::fuzz::Seed> seeds = {
      {"ok-echo", control(0, 255) + hello},
      {"ok-discard", control(0, 255) + message({.cmd = kDiscard, .syn = 8}, "dropped")},
      {"ok-empty-payload", control(0, 0) + message({.cmd = kEcho, .syn = 9}, "")},
      {"ok-pipeline", control(0, 255) + pipeline()},
      {"ok-pipeline-bytewise", control(1, 255) + pipeline()},
      {"ok-pipeline-reads-7", control(7, 255) + pipeline()},
      {"ok-pipeline-reads-40", control(40, 255) + pipeline()},
      {"ok-at-limit", control(13, 16) + message({.cmd = kEcho, .syn = 10}, std::string(64, 'x'))},
      {"ok-large-payload",
       control(200, 255) + message({.cmd = kEcho, .syn = 11}, std::string(1000, 'y')) + hello},
      {"partial-header", control(0, 255) + hello.substr(0, 10)},
      {"partial-payload", control(3, 255) + header_only(100) + std::string(40, 'z')},
      {"partial-after-messages", control(5, 255) + hello + hello + hello.substr(0, 18)},
      {"oversized-len", control(0, 16) + message({.cmd = kEcho, .syn = 12}, std::string(65, 'x'))},
      {"oversized-max-len", control(0, 255) + header_only(0xffffffff)},
      {"oversized-zero-limit", control(2, 0) + message({.cmd = kDiscard, .syn = 13}, "x")},
      {"oversized-after-messages", control(5, 16) + hello + hello + header_only(65) + hello},
      {"bad_header-version", control(0, 255) + message({.cmd = kEcho, .ver = 2, .syn = 14}, "v2")},
      {"bad_header-command", control(0, 255) + message({.cmd = 3, .syn = 15}, "c3")},
      {"bad_header-after-messages",
       control(9, 255) + pipeline() + message({.cmd = kEcho, .ver = 0, .syn = 16}, "")},
  };
  return tern::fuzz::write_seed_files(argc, argv, seeds);
}
