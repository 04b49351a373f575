#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/target.h"

namespace CLI {
class App;
}

// The command-line options of every mode, how they are registered on a CLI11 app, and the
// checks CLI11 cannot make by itself. A check failing at parse time is a CLI::ValidationError
// (exit status 2 in tern-bench). Everything here runs on the thread that parses.
namespace tern::bench {

inline constexpr std::size_t kMaxPayloadBytes = 64 << 20;  // tern-echo's --max-payload default

// How a run prints.
struct OutputOptions {
  bool json = false;   // one JSON line on stdout instead of text
  bool quiet = false;  // no progress lines on stderr
};

// What every network mode takes.
struct NetworkOptions {
  std::string target_text = "tcp://127.0.0.1:7000";
  std::string name = "tern";   // the server's name in the report
  pid_t server_pid = 0;        // 0: the server's CPU is not measured
  std::string io = "auto";     // the client's backend: epoll, uring or auto
  std::size_t workers = 0;     // client worker threads; 0: the mode's default
  double duration_s = -1;      // < 0: the mode's default; 0: no time bound
  std::string idle_poll_text;  // --idle-poll; empty: TERN_IDLE_POLL decides
  OutputOptions output;
  Target target;                                       // parsed from target_text by the checks
  std::optional<std::chrono::microseconds> idle_poll;  // parsed from idle_poll_text
};

// Report 000 testBenchmark (docs/benchmark-methods.md): 16-byte-header requests, -S sync or -A
// pipelined.
struct TrafficOptions {
  NetworkOptions net;
  bool sync = false;
  bool async = false;
  std::size_t connections = 10;  // -t: one connection per "thread" of report 000
  std::size_t payload_bytes = 1024;
  unsigned cmd = 1;
  std::size_t window = 0;   // -A: requests in flight per connection; 0: only TCP flow control
  std::uint64_t count = 0;  // requests over all connections; 0: no count bound
  double interval_s = 1;
  double timeout_s = 10;
};

// Report 003 asio pingpong (docs/benchmark-methods.md): sessions echo one block back and forth.
struct PingpongOptions {
  NetworkOptions net;  // --threads is net.workers
  std::size_t block_bytes = 16384;
  std::size_t sessions = 1;
  double timeout_s = 10;
  bool tls = false;    // --tls: every session over TLS (tern::tls)
  std::string tls_ca;  // --tls-ca: verify the server against this CA bundle (empty: no check)
};

// Report 004 NeTest (docs/benchmark-methods.md): short sessions (connect, N request/reply, close).
struct SessionsOptions {
  NetworkOptions net;
  std::uint64_t total = 50000;
  std::size_t in_flight = 100;
  std::size_t messages = 3;
  std::size_t size_bytes = 8;
  double timeout_s = 10;    // per session, connect to last reply
  std::size_t sources = 1;  // --sources: source addresses 127.0.0.1.. (1: the kernel picks)
  bool tls = false;         // --tls: a TLS handshake after each connect (tern::tls)
  bool tls_resume = false;  // --tls-resume: offer the last session's ticket (resumed handshakes)
  std::string tls_ca;       // --tls-ca: verify the server against this CA bundle
};

// Report 002 ttcp (docs/benchmark-methods.md): stop-and-wait length-prefixed messages.
struct TtcpOptions {
  NetworkOptions net;
  std::uint64_t count = 81920;
  std::size_t size_bytes = 1000;
  std::string client = "fiber";  // fiber or blocking
  bool in_process = false;
  std::size_t repeat = 1;
  std::string placement = "none";  // none, same or split (with --in-process)
  double timeout_s = 10;
};

// Report 004 coroutine switch test (docs/benchmark-methods.md), done right: ns per switch, every
// switch counted.
struct SwitchOptions {
  OutputOptions output;
  std::uint64_t switches = 10'000'000;
  std::string variant = "all";  // fiber, context or all
};

// Report 001 RPC (docs/benchmark-methods.md): -c clients make -n BenchmarkService.Say calls, each
// client one after another.
struct RpcOptions {
  NetworkOptions net;
  std::size_t concurrency = 100;  // -c: clients, a fiber each
  std::uint64_t calls = 100000;   // -n: calls over all clients
  std::size_t shared = 0;         // --shared K: the clients share K channels; 0: one each
  double timeout_s = 10;          // per call (and the wait for the connections)
  bool tls = false;               // --tls: every connection over TLS (tern::tls)
  std::string tls_ca;   // --tls-ca: verify the server against this CA bundle (empty: no check)
  bool stream = false;  // --stream: each client is one BenchmarkService/Pump stream
  // --stall S: with --stream, the clients write and never read the answers (the memory a peer
  // that reads nothing makes the server hold), and hold the full streams S seconds; 0: off.
  double stall_s = 0;
  std::uint32_t stream_window = 256u << 10;  // --stream-window: the client's window per stream
};

// Each add_*_options adds the subcommand with its options, defaults and checks to `app`
// and returns it; `options` must outlive the app.
CLI::App* add_traffic_options(CLI::App& app, TrafficOptions& options);
CLI::App* add_pingpong_options(CLI::App& app, PingpongOptions& options);
CLI::App* add_sessions_options(CLI::App& app, SessionsOptions& options);
CLI::App* add_ttcp_options(CLI::App& app, TtcpOptions& options);
CLI::App* add_switch_options(CLI::App& app, SwitchOptions& options);
CLI::App* add_rpc_options(CLI::App& app, RpcOptions& options);

// Checks the target (and resolves it into net.target), --name, --server-pid and --workers of a
// mode that talks to a server: the complaint, or empty. Main thread, while parsing.
std::string check_target_and_server(NetworkOptions& net);

// The checks across options, run after parsing (the add_*_options callbacks call them): they
// fill in the mode's defaults (workers, duration) and the parsed target, and return what is
// wrong, or an empty string.
std::string check_options(TrafficOptions& options);
std::string check_options(PingpongOptions& options);
std::string check_options(SessionsOptions& options);
std::string check_options(TtcpOptions& options);
std::string check_options(SwitchOptions& options);
std::string check_options(RpcOptions& options);

// The CPUs this process may run on. Any thread.
std::size_t usable_cpu_count();

}  // namespace tern::bench
