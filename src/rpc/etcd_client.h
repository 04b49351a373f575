#pragma once

// A small client of etcd's v3 API through its JSON gateway (HTTP/1.1 and JSON on the client
// port; docs/rpc.md says why not gRPC): prefix range, put under a lease, delete, lease grant,
// keep-alive and revoke, and a watch from a revision. Every call has a deadline and fails over
// between the configured etcd endpoints. Errors are rpc::Status values carrying etcd's own text.
// Worker fibers only; one EtcdClient per fiber at a time (calls do not share connections).

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/base/clock.h"
#include "tern/net/tcp_stream.h"
#include "tern/rpc/status.h"

namespace tern::rpc::detail {

// One key of a range answer or a watch event.
struct EtcdKeyValue {
  std::string key;
  std::string value;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

// The keys under a prefix and the store's revision when they were read.
struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  std::int64_t revision = 0;
};

// A change a watch reports: a put (key and new value) or a delete (key only).
struct EtcdEvent {
  bool deleted = false;
  EtcdKeyValue kv;
};

// The endpoints of an etcd cluster, parsed from "host:port,host:port" (names resolve when a call
// connects). Fails invalid_argument for an empty list or an entry without a port.
[[nodiscard]] Result<std::vector<std::string>> parse_etcd_endpoints(std::string_view list);

// The key just past every key that starts with `prefix` (etcd's range_end for a prefix).
std::string etcd_prefix_end(std::string_view prefix);

// Base64 (RFC 4648, with padding), as etcd's gateway carries keys and values. Any thread.
std::string base64_encode(std::string_view bytes);
// Decodes base64; false for text that is not base64.
[[nodiscard]] bool base64_decode(std::string_view text, std::string& out);

// An open watch: a chunked HTTP response that delivers one JSON message per event batch.
class EtcdWatch {
 public:
  EtcdWatch() = default;
  EtcdWatch(net::TcpStream stream, std::string buffered, std::string endpoint);

  // The next batch of events, waiting until the deadline (deadline_exceeded, the watch stays
  // usable). unavailable when the stream ends or breaks; out_of_range when etcd cancelled the
  // watch because its start revision was compacted (list again); internal for a malformed
  // message. `revision` is set to the store revision of the batch (also for progress messages
  // that carry no event).
  [[nodiscard]] Result<std::vector<EtcdEvent>> next(Deadline deadline, std::int64_t& revision);
  // Closes the stream (etcd drops the watch).
  void close() noexcept { stream_.close(); }
  const std::string& endpoint() const noexcept { return endpoint_; }

 private:
  // One decoded line of the chunked body, or an error.
  Result<std::string> next_line(Deadline deadline);

  net::TcpStream stream_;
  std::string raw_;   // bytes read, not yet de-chunked
  std::string body_;  // de-chunked body bytes, not yet split into lines
  std::string endpoint_;
  std::uint64_t chunk_left_ = 0;  // bytes left of the current chunk
  bool ended_ = false;
};

// Calls etcd's gateway on one of `endpoints` (starting with the one that last answered).
class EtcdClient {
 public:
  // `timeout` bounds every call unless it is given a deadline of its own.
  EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout);

  // Every key that starts with `prefix`, and the revision they were read at.
  [[nodiscard]] Result<EtcdRange> range_prefix(std::string_view prefix);
  // Writes key=value, attached to `lease` (0: none).
  [[nodiscard]] Result<void> put(std::string_view key, std::string_view value, std::int64_t lease);
  // Deletes key (no error when it did not exist).
  [[nodiscard]] Result<void> remove(std::string_view key);
  // A new lease of `ttl` seconds; returns its id.
  [[nodiscard]] Result<std::int64_t> lease_grant(std::chrono::seconds ttl);
  // Renews the lease once; returns its remaining TTL in seconds, 0 when it no longer exists.
  [[nodiscard]] Result<std::int64_t> lease_keepalive(std::int64_t lease);
  // Revokes the lease (etcd deletes its keys); not_found when it had already expired.
  [[nodiscard]] Result<void> lease_revoke(std::int64_t lease, Deadline deadline);
  // Watches every key under `prefix` from `start_revision` (its events included).
  [[nodiscard]] Result<EtcdWatch> watch_prefix(std::string_view prefix,
                                               std::int64_t start_revision);

  const std::vector<std::string>& endpoints() const noexcept { return endpoints_; }
  // While *stop is true, calls fail with cancelled instead of trying further endpoints (the owner
  // sets it, then interrupts the fiber waiting in a call).
  void set_stop_flag(const bool* stop) noexcept { stop_ = stop; }
  // The endpoint that answered last ("" before the first answer).
  const std::string& current() const noexcept { return current_; }

 private:
  // POSTs `body` to `path` on each endpoint in turn until one answers with HTTP; returns the
  // parsed JSON text of the answer (an etcd error answer becomes a Status with etcd's message).
  Result<std::string> post(std::string_view path, const std::string& body, Deadline deadline);

  std::vector<std::string> endpoints_;
  std::chrono::milliseconds timeout_;
  std::size_t next_ = 0;  // the endpoint to try first
  const bool* stop_ = nullptr;
  std::string current_;
};

}  // namespace tern::rpc::detail
