// tern::rpc::ServerContext's out-of-line methods.
#include "tern/rpc/server_context.h"

#include "metadata_lookup.h"

namespace tern::rpc {

std::optional<std::string_view> ServerContext::metadata(std::string_view key) const noexcept {
  return detail::find_entry(metadata_, key);
}

}  // namespace tern::rpc
