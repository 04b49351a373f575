#include "protobuf_log.h"

#include <google/protobuf/stubs/logging.h>

#include <mutex>
#include <string>

#include "tern/log/log.h"

namespace tern::rpc::detail {

namespace {

void to_tern_log(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      TERN_LOG_INFO("protobuf ({}:{}): {}", file, line, message);
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      TERN_LOG_WARN("protobuf ({}:{}): {}", file, line, message);
      break;
    case google::protobuf::LOGLEVEL_ERROR:
      TERN_LOG_ERROR("protobuf ({}:{}): {}", file, line, message);
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
