// tern::rpc::Status and the status helpers of generated code.
#include "tern/rpc/status.h"

#include <fmt/format.h>

#include <array>

#include "tern/rpc/service.h"

namespace tern::rpc {

namespace {

constexpr std::array<std::string_view, 17> kCodeNames = {
    "ok",
    "cancelled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
};

}  // namespace

std::string_view status_code_name(StatusCode code) noexcept {
  const auto index = static_cast<std::size_t>(code);
  if (index < kCodeNames.size()) return kCodeNames[index];
  static thread_local std::string other;
  other = fmt::format("status_{}", index);
  return other;
}

std::string Status::to_string() const {
  if (message_.empty()) return std::string(status_code_name(code_));
  return fmt::format("{}: {}", status_code_name(code_), message_);
}

Status Status::from_error(StatusCode code, std::string_view what, std::error_code error) {
  return Status(code, fmt::format("{}: {}", what, error.message()));
}

Status invalid_request(std::string_view type_name, std::size_t size) {
  return Status(StatusCode::invalid_argument,
                fmt::format("request of {} bytes is not a valid {}", size, type_name));
}

Status unimplemented_method(std::string_view service, std::string_view method) {
  return Status(StatusCode::unimplemented,
                fmt::format("{}/{} has no handler on this server", service, method));
}

}  // namespace tern::rpc
