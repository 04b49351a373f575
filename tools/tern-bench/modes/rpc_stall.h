#pragma once
// `tern-bench rpc --stream --stall S`: clients whose Pump streams never read, held full for S
// seconds, and what the streams and the server held meanwhile (docs/tern-bench.md).
#include <cstddef>
#include <cstdint>

#include "benchmark_message.pb.h"
#include "core/report.h"
#include "modes/rpc_run.h"

namespace tern::bench::rpc_mode {

// Client i: writes on one Pump stream, never reads, until the stall is over; notes what its
// stream held, then cancels it. A fiber of the run's worker i % workers.
void run_stall(Run& run, std::size_t i, ChannelSlot& slot, const BenchmarkMessage& request);

// The stall's clock: reads the server's RSS once every stream is full and --stall seconds later,
// then ends the stall. A fiber of the run, started with the clients.
void time_stall(Run& run);

// The server's RSS in KiB, or 0 when there is no --server-pid or it cannot be read. Any thread.
std::uint64_t server_rss_kib(const Run& run);

// Puts the stall's figures into the report; false when a stream failed or buffered more than
// its window plus one answer of `answer_bytes`. After the run, on the thread that started it.
bool report_stall(const Run& run, std::size_t answer_bytes, Report& report);

}  // namespace tern::bench::rpc_mode
