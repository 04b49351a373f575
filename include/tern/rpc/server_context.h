#pragma once

#include <tern/base/clock.h>
#include <tern/rpc/client_context.h>
#include <tern/rpc/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace google::protobuf {
class MessageLite;
}

namespace tern::tls {
struct PeerIdentity;
}

namespace tern::rpc {

namespace detail {
class ServerCall;
class ServerConnection;
}  // namespace detail

// What a handler knows about the call it serves: names, deadline, cancellation, metadata, peer;
// and the reply metadata it wants to send. Valid during the handler; use it from the handler's
// fiber (cancelled() from any fiber of the same worker).
class ServerContext {
 public:
  std::string_view service() const noexcept { return service_; }
  std::string_view method() const noexcept { return method_; }
  // The client's deadline (kNoDeadline when it set none).
  Deadline deadline() const noexcept { return deadline_; }
  // True once the client cancelled the call, the deadline passed or the connection closed: the
  // reply will not be read, so a long handler may stop early.
  bool cancelled() const noexcept;
  // Whether the caller asked for no reply (a one-way call).
  bool one_way() const noexcept { return one_way_; }
  // The call's correlation id on its connection.
  std::uint64_t call_id() const noexcept { return call_id_; }
  // The client's address ("127.0.0.1:51234").
  const std::string& peer() const noexcept;
  // On a TLS connection, who the client proved to be: its certificate's subject and subject
  // alternative names and whether they verified (a struct of tern/tls/tls_stream.h); nullptr on
  // a plaintext connection.
  const tls::PeerIdentity* peer_identity() const noexcept { return peer_identity_; }

  // The request metadata, and the value of one key (std::nullopt when absent).
  const MetadataEntries& metadata() const noexcept { return metadata_; }
  std::optional<std::string_view> metadata(std::string_view key) const noexcept;

  // Adds a key/value pair to the reply's metadata.
  void add_reply_metadata(std::string key, std::string value) {
    reply_metadata_.emplace_back(std::move(key), std::move(value));
  }
  const MetadataEntries& reply_metadata() const noexcept { return reply_metadata_; }

  // Pushes `message` to the client of this call's connection as a push frame naming
  // service/method (the client's ChannelOptions::on_push receives it), now and in order with
  // the connection's other frames. Fails with unavailable once the connection is closed. From
  // the handler's fiber, also after other calls on the connection ended.
  [[nodiscard]] Status push(std::string_view service, std::string_view method,
                            const google::protobuf::MessageLite& message);

 private:
  friend class detail::ServerCall;
  friend class Channel;

  // Marks the call cancelled and cancels the calls made with contexts from it in flight.
  void cancel() noexcept;
  void add_downstream(ClientContext& context) { downstream_.push_back(&context); }
  void remove_downstream(ClientContext& context) noexcept;

  std::string_view service_;  // the Service's and Method's own names, which outlive the call
  std::string_view method_;
  Deadline deadline_ = kNoDeadline;
  bool one_way_ = false;
  bool cancelled_ = false;
  const bool* connection_closed_ = nullptr;
  detail::ServerConnection* connection_ = nullptr;
  std::uint64_t call_id_ = 0;
  const tls::PeerIdentity* peer_identity_ = nullptr;
  MetadataEntries metadata_;
  MetadataEntries reply_metadata_;
  std::vector<ClientContext*> downstream_;  // calls in flight from_server_context(*this)
};

}  // namespace tern::rpc
