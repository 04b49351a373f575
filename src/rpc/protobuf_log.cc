#include "protobuf_log.h"

#include <google/protobuf/stubs/logging.h>

#include <mutex>
#include <string>

#include "tern/log/peer_log.h"

namespace tern::rpc::detail {

namespace {

// Protobuf logs while it parses what a peer sent (a string field with invalid UTF-8 gives an ERROR
// per field in debug builds), so its lines go through the shared peer-line limit.
void to_tern_log(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      TERN_PEER_LOG_INFO("protobuf ({}:{}): {}", file, line, message);
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      TERN_PEER_LOG_WARN("protobuf ({}:{}): {}", file, line, message);
      break;
    case google::protobuf::LOGLEVEL_ERROR:
      TERN_PEER_LOG_ERROR("protobuf ({}:{}): {}", file, line, message);
      break;
    case google::protobuf::LOGLEVEL_FATAL:
      TERN_LOG_FATAL("protobuf ({}:{}): {}", file, line, message);
  }
}

}  // namespace

void route_protobuf_logs() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&to_tern_log); });
}

}  // namespace tern::rpc::detail
