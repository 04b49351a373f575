#include "tern/rpc/client_context.h"

#include "tern/rpc/server_context.h"

#include "client_connection.h"
#include "load_balancer.h"
#include "metadata_lookup.h"

namespace tern::rpc {

std::optional<std::string_view> ClientContext::reply_metadata(std::string_view key) const noexcept {
  return detail::find_entry(reply_metadata_, key);
}

ClientContext::ClientContext(const ClientContext& other)
    : deadline_(other.deadline_),
      metadata_(other.metadata_),
      call_key_hash_(other.call_key_hash_),
      idempotent_(other.idempotent_),
      compress_(other.compress_),
      wait_for_ready_(other.wait_for_ready_),
      cancelled_(other.cancelled_),
      parent_(other.parent_) {}

ClientContext& ClientContext::operator=(const ClientContext& other) {
  if (this != &other) {
    deadline_ = other.deadline_;
    metadata_ = other.metadata_;
    call_key_hash_ = other.call_key_hash_;
    idempotent_ = other.idempotent_;
    compress_ = other.compress_;
    wait_for_ready_ = other.wait_for_ready_;
    cancelled_ = other.cancelled_;
    parent_ = other.parent_;
    active_ = nullptr;
    reply_metadata_.clear();
    peer_.clear();
    attempts_ = 0;
  }
  return *this;
}

void ClientContext::set_call_key(std::string_view key) noexcept {
  call_key_hash_ = detail::hash_key(key);
}

void ClientContext::cancel() noexcept {
  cancelled_ = true;
  if (active_ != nullptr) {
    active_->cancelled = true;
    active_->done.set();
    if (active_->also != nullptr) active_->also->set();
  }
}

ClientContext ClientContext::from_server_context(ServerContext& server) {
  ClientContext context;
  context.deadline_ = server.deadline();
  context.parent_ = &server;
  return context;
}

}  // namespace tern::rpc
