#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "../common/admin_option.h"

// tern-echo's command line as given, before any check (config.h checks it). Main thread.
namespace tern::echo {

// Every option of tern-echo, with its default.
struct EchoOptions {
  std::size_t threads = 0;  // 0: one worker per CPU
  std::string host = "127.0.0.1";
  std::uint16_t port = 7000;
  std::string io = "auto";
  std::size_t buf = 16 * 1024;
  std::string accept = "roundrobin";
  std::string mode = "echo";
  bool discard = false;  // --discard: same as --mode discard
  std::size_t max_connections = 0;
  double duration = 0;
  std::size_t max_payload = 64 << 20;
  std::string admin;                     // HOST:PORT of the admin endpoint (/metrics); empty: none
  tools::AdminAccessFlags admin_access;  // its TLS and token
  std::uint64_t idle_timeout_ms = 300'000;
  std::size_t min_progress = 64;  // bytes per progress interval (0: no check)
  std::uint64_t progress_interval_ms = 10'000;
  std::string idle_poll;           // --idle-poll's text; empty: not given
  std::string tls_cert;            // PEM certificate chain: serve TLS (with tls_key)
  std::string tls_key;             // PEM private key of tls_cert
  std::string stack_mode = "own";  // connection fibers: own or shared stacks
};

// Parses argv into `options`. Returns the exit status when the program ends here (0 after
// --help, 2 for a bad command line, CLI11 having printed why), or nullopt to go on. Main thread.
std::optional<int> parse_command_line(int argc, char** argv, EchoOptions& options);

}  // namespace tern::echo
