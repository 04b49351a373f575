// libFuzzer entry point: arbitrary bytes from a client connection to a real rpc::Server, which
// must keep serving and keep each connection under its memory budget
// (rpc_server_connection_parse.h). Built with -fsanitize=fuzzer when TERN_FUZZ is on;
// rpc_server_connection_corpus_check links it without.
#include <google/protobuf/stubs/common.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "rpc_server_connection_parse.h"
#include "tern/log/log.h"

#if GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif

// Runs once before the first input: the server logs a line for every connection it closes for a
// protocol error, which at fuzzing rates costs more than the connection itself.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(nullptr);
#endif
  tern::log::set_level(tern::log::Level::error);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tern::fuzz::run_server_connection(std::as_bytes(std::span(data, size)));
  return 0;
}
