// Runs every seed of the rpc_server_connection corpus against the fuzz server once (every
// invariant checked, as under the fuzzer) and checks the outcome its name promises on the
// attacking connection: "answered-*" at least one ok response and no goaway, "responded-*" at
// least one response of any status, "ponged-*" at least one pong, "rejected-*" a goaway and the
// connection closed, "streamed-*" at least one stream message back and a stream ended ok,
// "survived-*" nothing beyond the invariants. Registered with ctest in every
// build.
#include <cstddef>
#include <cstdint>
#include <string>

#include "corpus_check.h"
#include "rpc_server_connection_parse.h"

int main(int argc, char** argv) {
  return tern::fuzz::run_corpus_check(
      argc, argv,
      [](const std::filesystem::path& seed, std::span<const std::byte> bytes, std::string& note) {
        const tern::fuzz::ServerConnectionOutcome outcome =
            tern::fuzz::run_server_connection(bytes);
        note = std::to_string(outcome.responses) + " responses (" +
               std::to_string(outcome.ok_responses) + " ok), " + std::to_string(outcome.pongs) +
               " pongs, " + std::to_string(outcome.stream_messages) + " stream messages" +
               (outcome.goaway ? ", goaway" : "") + (outcome.closed ? ", closed" : "") + "; peak " +
               std::to_string(outcome.connection_bytes_peak) + " bytes held";
        const std::string expected = tern::fuzz::seed_outcome(seed);
        if (expected == "answered") return outcome.ok_responses > 0 && !outcome.goaway;
        if (expected == "responded") return outcome.responses > 0;
        if (expected == "ponged") return outcome.pongs > 0;
        if (expected == "streamed") {
          return outcome.stream_messages > 0 && outcome.ok_stream_statuses > 0 && !outcome.goaway;
        }
        if (expected == "rejected") return outcome.goaway && outcome.closed;
        return expected == "survived";
      });
}
