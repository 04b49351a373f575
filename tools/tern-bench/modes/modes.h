#pragma once

namespace CLI {
class App;
}

// The subcommands of tern-bench, one file each in this folder; the benchmark reports they
// reproduce are described in docs/benchmark-methods.md. Each add_<mode>_command registers its
// subcommand on the app (from main, before parsing) through add_mode (core/mode.h): when it is
// chosen, its callback runs the load and ends with the run's exit status.
namespace tern::bench {

// traffic: report 000's testBenchmark (16-byte-header requests, -S sync or -A pipelined).
void add_traffic_command(CLI::App& app);
// pingpong: report 003's asio pingpong throughput.
void add_pingpong_command(CLI::App& app);
// sessions: report 004's NeTest short sessions.
void add_sessions_command(CLI::App& app);
// ttcp: report 002's stop-and-wait, tern fibers or blocking threads.
void add_ttcp_command(CLI::App& app);
// switch: report 004's coroutine switch test, as ns per switch.
void add_switch_command(CLI::App& app);
// log: report 002's log speed (log_mode.cc).
void add_log_command(CLI::App& app);
// rpc: report 001's RPC benchmark, BenchmarkService/Say over tern::rpc (rpc.cc).
void add_rpc_command(CLI::App& app);
// failover: a server of a channel killed or stopped under load (failover.cc).
void add_failover_command(CLI::App& app);
// soak: reliability soak, scenarios echo, rpc, idle and flood (soak.cc; the scenarios in soak/).
void add_soak_command(CLI::App& app);

}  // namespace tern::bench
