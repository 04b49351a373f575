// grpc_stream_client: the gRPC C++ side of the streaming benchmark (docs/rpc.md, "Streaming
// benchmark"). -c streams share one channel (one HTTP/2 connection, as `tern-bench rpc --stream
// --shared 1` shares one tern connection); each is a tern.bench.BenchmarkService/Pump stream that
// carries its share of -n messages (report 001's 583-byte BenchmarkMessage). A thread per stream
// writes its messages without waiting for answers (gRPC's HTTP/2 flow control bounds what is in
// flight) while another reads and checks every answer. The rate is verified answers / seconds from
// the start to the last answer.
//
//   grpc_stream_client --target HOST:PORT -c 100 -n 1000000 [--timeout 60] [--peer NAME] [--json]
//
// The server is grpc_rpc_server (either --api). --json prints one line in the shape of
// `tern-bench rpc --stream --json` (figures calls, tps = messages/s, elapsed_s), so the benchmark
// suite reads both alike. Exit status: 0 every answer verified, 1 not, 2 bad arguments.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "benchmark_message.grpc.pb.h"
#include "rpc_message.h"

namespace {

using Clock = std::chrono::steady_clock;
using tern::bench::BenchmarkMessage;
using tern::bench::BenchmarkService;

struct Outcome {
  std::uint64_t verified = 0;
  std::uint64_t failed = 0;
  Clock::time_point last{};
  std::string error;
};

// One stream: writes `quota` messages from a thread of its own and reads the answers here.
Outcome run_stream(BenchmarkService::Stub& stub, std::uint64_t quota, Clock::time_point deadline) {
  Outcome outcome;
  BenchmarkMessage request;
  tern::bench::fill_rpc_request(request);
  grpc::ClientContext context;
  context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - Clock::now()));
  std::unique_ptr<grpc::ClientReaderWriter<BenchmarkMessage, BenchmarkMessage>> stream =
      stub.Pump(&context);
  std::thread writer([&] {
    for (std::uint64_t m = 0; m < quota; ++m) {
      if (!stream->Write(request)) return;
    }
    stream->WritesDone();
  });
  BenchmarkMessage reply;
  std::uint64_t answered = 0;
  for (; answered < quota && stream->Read(&reply); ++answered) {
    if (std::string why = tern::bench::check_rpc_reply(reply); !why.empty()) {
      ++outcome.failed;
      if (outcome.error.empty()) outcome.error = why;
      continue;
    }
    ++outcome.verified;
  }
  outcome.last = Clock::now();
  if (answered < quota) {
    outcome.failed += quota - answered;
    context.TryCancel();
  }
  writer.join();
  grpc::Status status = stream->Finish();
  if (!status.ok() && answered == quota) ++outcome.failed;
  if (!status.ok() && outcome.error.empty()) outcome.error = status.error_message();
  return outcome;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target;
  std::uint64_t streams = 1;
  std::uint64_t messages = 100000;
  double timeout_s = 60;
  bool json = false;
  std::string peer = "grpc";
  CLI::App app{
      "grpc_stream_client: gRPC C++ streams to tern.bench.BenchmarkService/Pump (grpc_rpc_server "
      "either --api): -c streams over one connection carry -n messages in all; every answer is "
      "checked; prints messages/s."};
  app.add_option("--target", target, "HOST:PORT of the server")->required();
  app.add_option("-c,--streams", streams, "streams, all on one connection")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("-n,--messages", messages, "messages over all streams (N/C each)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds the whole run may take (each stream's deadline)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--peer", peer, "the name the report gives the server (grpc-sync, ...)")
      ->capture_default_str();
  app.add_flag("--json", json, "one JSON line instead of text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (messages < streams) {
    std::fprintf(stderr, "grpc_stream_client: -n %llu is less than -c %llu\n",
                 static_cast<unsigned long long>(messages),
                 static_cast<unsigned long long>(streams));
    return 2;
  }

  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  const auto connect_by = std::chrono::system_clock::now() + std::chrono::seconds(10);
  if (!channel->WaitForConnected(connect_by)) {
    std::fprintf(stderr, "grpc_stream_client: no connection to %s within 10 s\n", target.c_str());
    return 1;
  }
  std::unique_ptr<BenchmarkService::Stub> stub = BenchmarkService::NewStub(channel);

  std::vector<Outcome> outcomes(streams);
  std::vector<std::thread> readers;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (std::uint64_t s = 0; s < streams; ++s) {
    const std::uint64_t quota = messages / streams + (s < messages % streams ? 1 : 0);
    readers.emplace_back([&, s, quota] { outcomes[s] = run_stream(*stub, quota, deadline); });
  }
  for (std::thread& reader : readers) reader.join();

  Outcome total;
  total.last = start;
  for (const Outcome& o : outcomes) {
    total.verified += o.verified;
    total.failed += o.failed;
    total.last = std::max(total.last, o.last);
    if (total.error.empty()) total.error = o.error;
  }
  const double elapsed = std::chrono::duration<double>(total.last - start).count();
  const double rate = elapsed > 0 ? static_cast<double>(total.verified) / elapsed : 0;
  const bool verified = total.failed == 0 && total.verified == messages;
  if (json) {
    nlohmann::ordered_json line;
    line["tool"] = peer;
    line["mode"] = "rpc";
    line["target"] = "tcp://" + target;
    line["params"] = {{"concurrency", streams},
                      {"calls", messages},
                      {"message_bytes", tern::bench::kRpcRequestBytes},
                      {"shared", 1},
                      {"stream", true}};
    line["figures"] = {{"calls", total.verified}, {"tps", rate}, {"elapsed_s", elapsed}};
    line["errors"] = total.failed;
    line["verified"] = verified;
    line["error_messages"] = nlohmann::ordered_json::array();
    if (!total.error.empty()) line["error_messages"].push_back(total.error);
    std::printf("%s\n", line.dump().c_str());
  } else {
    std::printf(
        "grpc_stream_client: %llu stream(s) over one connection, %zu-byte messages: %llu verified "
        "answers of %llu messages in %.3f s: %.1f messages/s, %llu failed%s%s\n",
        static_cast<unsigned long long>(streams), tern::bench::kRpcRequestBytes,
        static_cast<unsigned long long>(total.verified), static_cast<unsigned long long>(messages),
        elapsed, rate, static_cast<unsigned long long>(total.failed),
        total.error.empty() ? "" : "; first: ", total.error.c_str());
  }
  return verified ? 0 : 1;
}
