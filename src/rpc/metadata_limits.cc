#include "metadata_limits.h"

#include <cstdint>
#include <optional>

namespace tern::rpc::detail {

namespace {

// Field numbers of wire::Metadata and wire::MetadataEntry (src/rpc/metadata.proto).
constexpr std::uint64_t kEntriesField = 6;
constexpr std::uint64_t kKeyField = 1;
constexpr std::uint64_t kValueField = 2;

// A cursor over protobuf wire format.
class WireReader {
 public:
  explicit WireReader(std::span<const std::byte> bytes) noexcept : bytes_(bytes) {}

  bool done() const noexcept { return at_ == bytes_.size(); }

  std::optional<std::uint64_t> varint() noexcept {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64 && at_ < bytes_.size(); shift += 7) {
      const auto byte = static_cast<std::uint8_t>(bytes_[at_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return std::nullopt;
  }

  // Reads one field's tag and skips or returns its payload: for a length-delimited field, the
  // bytes in `payload`. False on malformed input.
  bool field(std::uint64_t& number, std::span<const std::byte>& payload) noexcept {
    const std::optional<std::uint64_t> tag = varint();
    if (!tag) return false;
    number = *tag >> 3;
    payload = {};
    switch (*tag & 7) {
      case 0:
        return varint().has_value();
      case 1:
        return skip(8);
      case 5:
        return skip(4);
      case 2: {
        const std::optional<std::uint64_t> length = varint();
        if (!length || *length > bytes_.size() - at_) return false;
        payload = bytes_.subspan(at_, static_cast<std::size_t>(*length));
        at_ += static_cast<std::size_t>(*length);
        return true;
      }
      default:
        return false;
    }
  }

 private:
  bool skip(std::size_t n) noexcept {
    if (n > bytes_.size() - at_) return false;
    at_ += n;
    return true;
  }

  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

// Key plus value bytes of one entry as the parser would keep them (the last occurrence of a
// field wins); nullopt when malformed.
std::optional<std::size_t> entry_size(std::span<const std::byte> bytes) noexcept {
  WireReader reader(bytes);
  std::size_t key = 0;
  std::size_t value = 0;
  while (!reader.done()) {
    std::uint64_t number = 0;
    std::span<const std::byte> payload;
    if (!reader.field(number, payload)) return std::nullopt;
    if (number == kKeyField) key = payload.size();
    if (number == kValueField) value = payload.size();
  }
  return key + value;
}

}  // namespace

MetadataShape metadata_shape(std::span<const std::byte> bytes, std::size_t max_entries) noexcept {
  MetadataShape shape;
  WireReader reader(bytes);
  while (!reader.done() && shape.entries <= max_entries) {
    std::uint64_t number = 0;
    std::span<const std::byte> payload;
    if (!reader.field(number, payload)) {
      shape.well_formed = false;
      return shape;
    }
    if (number != kEntriesField) continue;
    ++shape.entries;
    const std::optional<std::size_t> size = entry_size(payload);
    if (!size) {
      shape.well_formed = false;
      return shape;
    }
    if (*size > shape.largest_entry) shape.largest_entry = *size;
  }
  return shape;
}

}  // namespace tern::rpc::detail
