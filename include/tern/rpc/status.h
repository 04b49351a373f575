#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace tern::rpc {

// The outcome of a call, as it travels on the wire (docs/rpc-protocol.md). The numbers are
// gRPC's, so tools and people who know those codes read them the same way.
enum class StatusCode : std::uint8_t {
  ok = 0,
  cancelled = 1,            // the caller cancelled the call
  unknown = 2,              // an error with no better code
  invalid_argument = 3,     // the request is malformed (e.g. not a valid protobuf message)
  deadline_exceeded = 4,    // the deadline passed before the reply arrived
  not_found = 5,            // something the request names does not exist
  already_exists = 6,       // something the request would create exists already
  permission_denied = 7,    // the caller may not do this
  resource_exhausted = 8,   // a limit was hit (e.g. the server's concurrent-call limit)
  failed_precondition = 9,  // the system is not in a state that allows the call
  aborted = 10,             // the call was aborted (e.g. a conflict); retry at a higher level
  out_of_range = 11,        // a value is past the valid range
  unimplemented = 12,       // the server has no such service or method
  internal = 13,            // a broken invariant on the server or in the protocol
  unavailable = 14,         // no connection, or the connection broke: retrying may succeed
  data_loss = 15,           // unrecoverable loss or corruption of data
  unauthenticated = 16,     // the call carries no valid credentials
};

// The lower-case name of a code ("deadline_exceeded"); "status_N" for numbers past the table.
// Any thread.
std::string_view status_code_name(StatusCode code) noexcept;

// A status code and a message for people. Cheap to copy when OK (no message). Any thread.
class Status {
 public:
  Status() noexcept = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const noexcept { return code_ == StatusCode::ok; }
  StatusCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "deadline_exceeded: no reply within 100 ms", or "ok".
  std::string to_string() const;

  // A status for a transport error (e.g. "connect to 10.0.0.1:80: Connection refused").
  static Status from_error(StatusCode code, std::string_view what, std::error_code error);

  friend bool operator==(const Status& a, StatusCode b) noexcept { return a.code_ == b; }

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

// The reply of a call, or the status that says why there is none. Any thread.
template <typename T>
using Result = std::expected<T, Status>;

}  // namespace tern::rpc
