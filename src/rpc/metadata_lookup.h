#pragma once

// Finding a key among a call's metadata entries (ServerContext, ClientContext). Any thread.

#include <optional>
#include <string_view>

#include "tern/rpc/client_context.h"

namespace tern::rpc::detail {

// The value of the first entry named key, or std::nullopt. Any thread.
inline std::optional<std::string_view> find_entry(const MetadataEntries& entries,
                                                  std::string_view key) noexcept {
  for (const auto& [k, v] : entries) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

}  // namespace tern::rpc::detail
