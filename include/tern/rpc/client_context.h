#pragma once

#include <tern/base/clock.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern::rpc {

class ServerContext;

namespace detail {
struct PendingCall;
class ClientConnection;
}  // namespace detail

// Key/value pairs sent with a call or its reply (docs/rpc-protocol.md, metadata.user).
using MetadataEntries = std::vector<std::pair<std::string, std::string>>;

// The settings and the outcome details of one client call: deadline, metadata, load-balancing
// key, retry, compression and wait-for-ready choices, cancellation. Make one per call (or reuse it
// for calls made one after another) on the fiber that calls; cancel() may come from any fiber of
// the same worker.
class ClientContext {
 public:
  ClientContext() = default;
  // A context for a call a handler makes to another service (deadline propagation): it carries
  // the handler's deadline, so the downstream server sees the time the original caller has left,
  // and its call is cancelled when the handler's call is (its caller cancelled it, or the
  // connection closed); a call started after that fails with cancelled at once. Nothing passes
  // on by itself: a context made otherwise has no deadline but its own. Use it on the handler's
  // fiber (or fibers it waits for) while the handler runs.
  static ClientContext from_server_context(ServerContext& server);

  ClientContext(const ClientContext& other);
  ClientContext& operator=(const ClientContext& other);

  // The call fails with deadline_exceeded at this point (and the server sees it as its deadline).
  void set_deadline(Deadline deadline) noexcept { deadline_ = deadline; }
  // As set_deadline(now + timeout).
  void set_timeout(std::chrono::nanoseconds timeout) noexcept {
    deadline_ = deadline_after(timeout);
  }
  Deadline deadline() const noexcept { return deadline_; }

  // Adds a key/value pair to the call's metadata (e.g. "authorization", "Bearer ...").
  void add_metadata(std::string key, std::string value) {
    metadata_.emplace_back(std::move(key), std::move(value));
  }
  const MetadataEntries& metadata() const noexcept { return metadata_; }

  // Routes the call by this key when the channel balances by consistent hash: calls with the same
  // key go to the same endpoint while it is healthy.
  void set_call_key(std::string_view key) noexcept;
  const std::optional<std::uint64_t>& call_key_hash() const noexcept { return call_key_hash_; }

  // Marks the call safe to repeat: when its connection fails before a reply, or the server
  // answers unavailable, the channel tries another endpoint (ChannelOptions::max_retries, within
  // the retry budget), and it may send hedged requests (ChannelOptions::hedging).
  void set_idempotent(bool idempotent = true) noexcept { idempotent_ = idempotent; }
  bool idempotent() const noexcept { return idempotent_; }

  // Compresses the request body with zstd (and asks for a compressed reply).
  void set_compression(bool compress = true) noexcept { compress_ = compress; }
  bool compression() const noexcept { return compress_; }

  // Lets the call wait, within its deadline, for a connection when none is ready (the server is
  // not up yet, or the channel is reconnecting) instead of failing at once with unavailable. A
  // call whose deadline passes first fails with deadline_exceeded, one cancelled while it waits
  // (or whose fiber is interrupted) with cancelled. A connection that breaks with the call in
  // flight still fails it with unavailable.
  void set_wait_for_ready(bool wait = true) noexcept { wait_for_ready_ = wait; }
  bool wait_for_ready() const noexcept { return wait_for_ready_; }

  // Cancels the call in flight (it returns cancelled, and the server is told if the request went
  // out) or, if none is in flight, makes the next call with this context fail with cancelled at
  // once.
  void cancel() noexcept;
  bool cancelled() const noexcept { return cancelled_; }
  // The handler's context this one was made from (from_server_context), or nullptr.
  ServerContext* parent() const noexcept { return parent_; }

  // After a call: the metadata the server sent with the reply, and where the call went.
  const MetadataEntries& reply_metadata() const noexcept { return reply_metadata_; }
  // The value of reply metadata `key`, or std::nullopt.
  std::optional<std::string_view> reply_metadata(std::string_view key) const noexcept;
  const std::string& peer() const noexcept { return peer_; }
  // How many endpoints the last call tried (1 unless it was retried).
  std::uint32_t attempts() const noexcept { return attempts_; }

 private:
  friend class Channel;
  friend class detail::ClientConnection;

  Deadline deadline_ = kNoDeadline;
  MetadataEntries metadata_;
  std::optional<std::uint64_t> call_key_hash_;
  bool idempotent_ = false;
  bool compress_ = false;
  bool wait_for_ready_ = false;
  bool cancelled_ = false;
  detail::PendingCall* active_ = nullptr;
  ServerContext* parent_ = nullptr;
  MetadataEntries reply_metadata_;
  std::string peer_;
  std::uint32_t attempts_ = 0;
};

}  // namespace tern::rpc
