// tern::rpc::ServerContext's out-of-line methods.
#include "tern/rpc/server_context.h"

#include <algorithm>

#include "metadata_lookup.h"
#include "server_connection.h"

namespace tern::rpc {

std::optional<std::string_view> ServerContext::metadata(std::string_view key) const noexcept {
  return detail::find_entry(metadata_, key);
}

const std::string& ServerContext::peer() const noexcept {
  static const std::string no_connection;
  return connection_ != nullptr ? connection_->peer() : no_connection;
}

void ServerContext::cancel() noexcept {
  cancelled_ = true;
  // ClientContext::cancel only marks and wakes its call, which leaves the list when it returns.
  for (ClientContext* downstream : downstream_) downstream->cancel();
}

void ServerContext::remove_downstream(ClientContext& context) noexcept {
  std::erase(downstream_, &context);
}

Status ServerContext::push(std::string_view service, std::string_view method,
                           const google::protobuf::MessageLite& message) {
  if (connection_ == nullptr) {
    return Status(StatusCode::failed_precondition, "the call has no connection to push to");
  }
  return connection_->push(service, method, message);
}

}  // namespace tern::rpc
