#pragma once

namespace CLI {
class App;
}

// The subcommands of tern-bench. Each add_<mode>_command registers its subcommand on the app
// (from main, before parsing); the subcommand's callback runs the load when it is chosen and
// throws CLI::RuntimeError(status) for a non-zero exit status (1: the run failed its checks).
namespace tern::bench {

// traffic: SEEDS 000 testBenchmark (16-byte-header requests, -S sync or -A pipelined).
void add_traffic_command(CLI::App& app);
// pingpong: SEEDS 003 asio pingpong throughput.
void add_pingpong_command(CLI::App& app);
// sessions: SEEDS 004 NeTest short sessions.
void add_sessions_command(CLI::App& app);
// ttcp: SEEDS 002 stop-and-wait, tern fibers or blocking threads.
void add_ttcp_command(CLI::App& app);
// switch: SEEDS 004 coroutine switch test, as ns per switch.
void add_switch_command(CLI::App& app);
// log: SEEDS 002 log speed (log_mode.cc).
void add_log_command(CLI::App& app);
// rpc: SEEDS 001 RPC benchmark, BenchmarkService/Say over tern::rpc (rpc.cc).
void add_rpc_command(CLI::App& app);
// soak: reliability soak, scenarios echo, rpc, idle and flood (soak.cc).
void add_soak_command(CLI::App& app);

// Ends a mode's callback with `status` as the process's exit status (0 returns normally).
void finish_with(int status);

}  // namespace tern::bench
