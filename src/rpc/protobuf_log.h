#pragma once

namespace tern::rpc::detail {

// Sends protobuf's own log messages (for example "String field ... contains invalid UTF-8
// data") to tern::log, with protobuf's file and line, instead of bare lines on stderr. Takes
// effect once per process, on the first call; a handler the program installs later wins. Any
// thread.
void route_protobuf_logs();

}  // namespace tern::rpc::detail
