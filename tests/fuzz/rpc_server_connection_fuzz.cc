// libFuzzer entry point: arbitrary bytes from a client connection to a real rpc::Server, which
// must keep serving and keep each connection under its memory budget
// (rpc_server_connection_parse.h). Built with -fsanitize=fuzzer when TERN_FUZZ is on;
// rpc_server_connection_corpus_check links it without.
#include <google/protobuf/stubs/common.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rpc_server_connection_parse.h"
#include "tern/log/log.h"

#if GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif

// Runs once before the first input, and before libFuzzer reads its flags from argv. The server
// logs a line for every connection it closes for a protocol error, which at fuzzing rates costs
// more than the connection itself: only errors are logged. And leak checks between inputs are
// off (-detect_leaks=0 first, so a later flag still wins): the server keeps running across
// inputs, and what its parked fibers hold is reachable only from their stacks, which
// LeakSanitizer does not scan, so a check in the middle of the run reports the memory of live
// connections. The corpus check runs the seeds with LeakSanitizer at exit, after the server has
// stopped.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(nullptr);
#endif
  tern::log::set_level(tern::log::Level::error);
  static char no_leak_checks[] = "-detect_leaks=0";
  static std::vector<char*> args;
  args.assign(*argv, *argv + *argc);
  args.insert(args.begin() + 1, no_leak_checks);
  args.push_back(nullptr);
  *argc = static_cast<int>(args.size()) - 1;
  *argv = args.data();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tern::fuzz::run_server_connection(std::as_bytes(std::span(data, size)));
  return 0;
}
