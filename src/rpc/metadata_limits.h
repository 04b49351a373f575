#pragma once

// The shape of a metadata block (entry count, largest entry) read from its wire bytes without
// building anything, so a block of many tiny entries is refused before the parser allocates
// one object per entry. Any thread.

#include <cstddef>
#include <span>

namespace tern::rpc::detail {

struct MetadataShape {
  std::size_t entries = 0;        // entries the parsed form would have
  std::size_t largest_entry = 0;  // key plus value bytes of its largest entry
  bool well_formed = true;        // false: not valid wire format (the parser reports it)
};

// Walks the top-level fields of a wire::Metadata block and each entry's key and value, stopping
// once `max_entries` is passed (the count then exceeds it).
MetadataShape metadata_shape(std::span<const std::byte> bytes, std::size_t max_entries) noexcept;

}  // namespace tern::rpc::detail
