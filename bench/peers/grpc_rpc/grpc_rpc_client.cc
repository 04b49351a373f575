// grpc_rpc_client: the gRPC C++ client of report 001's RPC benchmark. -c C clients, each with
// its own channel (so its own TCP connection), each making its share of -n unary calls to
// tern.bench.BenchmarkService/Say one after another; every reply is checked and every call timed.
//
//   grpc_rpc_client --target HOST:PORT -c 100 -n 1000000 [--threads 1] [--timeout 10]
//                   [--peer grpc] [--json] [--tls-ca ca.pem [--tls-server-name NAME]]
//
// Few threads drive all C clients through gRPC's asynchronous API: each of --threads threads owns
// a completion queue and the clients given to it; when a reply arrives there, the thread records
// it and starts that client's next call. The channels connect before the clock starts. Latency is
// steady-clock time from starting a call to its completion, over every verified reply; the
// percentiles are exact (all samples sorted). Each call has a deadline (--timeout); a client
// whose channel does not connect, or whose calls fail 3 times in a row, stops, and every call it
// has left counts as an error. --peer names the server in the report (grpc-sync or
// grpc-callback). With --tls-ca the channels speak TLS (grpc::SslCredentials) and verify the
// server's certificate against that CA file, for the host of --target or --tls-server-name
// (gRPC's ssl_target_name_override). Exit status: 0 verified, 1 not verified, 2 bad arguments.

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "benchmark_message.grpc.pb.h"
#include "latency_stats.h"
#include "rpc_message.h"

namespace {

using Clock = std::chrono::steady_clock;
using tern::bench::BenchmarkMessage;
using tern::bench::BenchmarkService;

constexpr std::size_t kMaxErrorMessages = 5;
// This many failed calls in a row end a client's run: each call it has left counts as an error,
// so that a server that stopped answering cannot hold the run for calls x timeout.
constexpr int kGiveUpAfter = 3;
constexpr char kGiveUpMessage[] = "not made: the client gave up after 3 failed calls in a row";

struct Options {
  std::string target;
  std::uint64_t concurrency = 0;
  std::uint64_t calls = 0;
  std::size_t threads = 1;
  double timeout_s = 10;
  std::string peer = "grpc";
  bool json = false;
  std::string tls_ca;           // PEM CA bundle: TLS channels (empty: plaintext)
  std::string tls_server_name;  // the name the server's certificate must carry (empty: the host)
};

// One of the C clients: its own channel and generated client object, and how many calls it
// still has to make.
struct Caller {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<BenchmarkService::Stub> service;
  bool connected = false;
  std::uint64_t remaining = 0;
  int failures_in_a_row = 0;
};

// One call in flight; its address is its completion queue tag.
struct Call {
  Caller* caller = nullptr;
  Clock::time_point start;
  grpc::ClientContext context;
  BenchmarkMessage reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<BenchmarkMessage>> reader;
};

// The first few distinct error messages and the count of all errors.
class ErrorLog {
 public:
  void add(std::string message, std::uint64_t count = 1) {
    count_ += count;
    if (messages_.size() < kMaxErrorMessages &&
        std::find(messages_.begin(), messages_.end(), message) == messages_.end())
      messages_.push_back(std::move(message));
  }
  void merge(const ErrorLog& other) {
    count_ += other.count_;
    for (const std::string& message : other.messages_) {
      if (messages_.size() < kMaxErrorMessages &&
          std::find(messages_.begin(), messages_.end(), message) == messages_.end())
        messages_.push_back(message);
    }
  }
  std::uint64_t count() const { return count_; }
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::uint64_t count_ = 0;
  std::vector<std::string> messages_;
};

// One client thread: a completion queue and the clients it drives. Built and filled on the main
// thread, then run() on its own thread; the counters are read by the progress thread.
class Worker {
 public:
  Worker(const BenchmarkMessage& request, std::chrono::nanoseconds timeout)
      : request_(request), timeout_(timeout) {}

  // Gives the worker one more client. Before run().
  void add(Caller* caller) {
    callers_.push_back(caller);
    expected_ += caller->remaining;
  }

  // Starts every client's first call, then completes calls and starts the next ones until all
  // clients are done. On the worker's own thread.
  void run() {
    latencies_.reserve(expected_);
    std::size_t active = 0;
    for (Caller* caller : callers_) {
      if (caller->remaining == 0) continue;
      ++active;
      start_call(*caller);
    }
    void* tag = nullptr;
    bool ok = false;
    while (active > 0 && cq_.Next(&tag, &ok)) {
      std::unique_ptr<Call> call(static_cast<Call*>(tag));
      const Clock::time_point end = Clock::now();
      Caller& caller = *call->caller;
      std::string why;
      if (!ok) {
        why = "completion queue reported a failed operation";
      } else if (!call->status.ok()) {
        why = "grpc status " + std::to_string(call->status.error_code()) + ": " +
              call->status.error_message();
      } else {
        why = tern::bench::check_rpc_reply(call->reply);
      }
      if (why.empty()) {
        caller.failures_in_a_row = 0;
        latencies_.push_back(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(end - call->start).count()));
        done_.fetch_add(1, std::memory_order_relaxed);
      } else {
        fail(std::move(why));
        if (++caller.failures_in_a_row == kGiveUpAfter && caller.remaining > 1) {
          fail(kGiveUpMessage, caller.remaining - 1);
          caller.remaining = 1;
        }
      }
      if (--caller.remaining > 0) {
        start_call(caller);
      } else {
        --active;
      }
    }
    cq_.Shutdown();
    while (cq_.Next(&tag, &ok)) delete static_cast<Call*>(tag);
  }

  std::uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  std::uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }
  // After run() returned.
  std::vector<std::uint64_t>& latencies() { return latencies_; }
  const ErrorLog& errors() const { return errors_; }

 private:
  void start_call(Caller& caller) {
    auto call = std::make_unique<Call>();
    call->caller = &caller;
    call->start = Clock::now();
    call->context.set_deadline(std::chrono::system_clock::now() + timeout_);
    call->reader = caller.service->PrepareAsyncSay(&call->context, request_, &cq_);
    call->reader->StartCall();
    Call* tag = call.release();
    tag->reader->Finish(&tag->reply, &tag->status, tag);
  }

  void fail(std::string message, std::uint64_t count = 1) {
    errors_.add(std::move(message), count);
    failed_.fetch_add(count, std::memory_order_relaxed);
  }

  const BenchmarkMessage& request_;
  const std::chrono::nanoseconds timeout_;
  grpc::CompletionQueue cq_;
  std::vector<Caller*> callers_;
  std::uint64_t expected_ = 0;
  std::vector<std::uint64_t> latencies_;
  ErrorLog errors_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::uint64_t> failed_{0};
};

// Prints "[   1.0 s] calls N tps X errors E" on stderr once a second while the load runs.
class Progress {
 public:
  explicit Progress(const std::vector<std::unique_ptr<Worker>>& workers) : workers_(workers) {}
  ~Progress() { stop(); }

  // Starts the printing thread. From the main thread.
  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  // Stops and joins it. From the main thread.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    const Clock::time_point begin = Clock::now();
    Clock::time_point previous_time = begin;
    std::uint64_t previous_done = 0;
    for (Clock::time_point next = begin + std::chrono::seconds(1);;
         next += std::chrono::seconds(1)) {
      {
        std::unique_lock lock(mutex_);
        if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
      }
      std::uint64_t done = 0;
      std::uint64_t failed = 0;
      for (const auto& worker : workers_) {
        done += worker->done();
        failed += worker->failed();
      }
      const Clock::time_point now = Clock::now();
      const double interval = std::chrono::duration<double>(now - previous_time).count();
      const double tps = interval > 0 ? static_cast<double>(done - previous_done) / interval : 0;
      std::fprintf(stderr, "[%6.1f s] calls %llu tps %.0f errors %llu\n",
                   std::chrono::duration<double>(now - begin).count(),
                   static_cast<unsigned long long>(done), tps,
                   static_cast<unsigned long long>(failed));
      previous_time = now;
      previous_done = done;
    }
  }

  const std::vector<std::unique_ptr<Worker>>& workers_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

// Lets thousands of connections out: the soft descriptor limit goes up to the hard one.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

const char* state_name(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN:
      return "SHUTDOWN";
  }
  return "unknown";
}

double rounded(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

// Insecure credentials, or TLS verifying the server against --tls-ca (nullptr: unreadable).
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const Options& options) {
  if (options.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream in(options.tls_ca, std::ios::binary);
  if (!in) return nullptr;
  std::ostringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  return grpc::SslCredentials(ssl);
}

// Opens the C channels, each with arguments no other channel has, so that none shares a
// subchannel (and so a connection) with another, and waits until they are connected (at most
// --timeout, and at least 10 s, for all of them).
std::vector<Caller> open_callers(const Options& options,
                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  std::vector<Caller> callers(options.concurrency);
  for (std::uint64_t i = 0; i < options.concurrency; ++i) {
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    arguments.SetInt("tern.bench.client_index", static_cast<int>(i));
    if (!options.tls_server_name.empty())
      arguments.SetSslTargetNameOverride(options.tls_server_name);
    callers[i].channel = grpc::CreateCustomChannel(options.target, credentials, arguments);
    callers[i].service = BenchmarkService::NewStub(callers[i].channel);
    callers[i].channel->GetState(/*try_to_connect=*/true);
  }
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(std::max(options.timeout_s, 10.0)));
  for (Caller& caller : callers) caller.connected = caller.channel->WaitForConnected(deadline);
  return callers;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "grpc_rpc_client: the gRPC C++ client of report 001's RPC benchmark: -c clients, each\n"
      "with its own connection, make -n unary calls in all to tern.bench.BenchmarkService/Say,\n"
      "each client one call after another; every reply is checked and every call timed."};
  app.add_option("--target", options.target, "server address, HOST:PORT")->required();
  app.add_option("-c,--concurrency", options.concurrency, "clients (connections)")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--calls", options.calls, "calls in all, shared out among the clients")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", options.threads,
                 "client threads, each with a completion queue driving its share of the clients")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_s, "seconds one call may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--peer", options.peer, "the name the report gives the server (grpc-sync, ...)")
      ->capture_default_str();
  app.add_flag("--json", options.json, "print one line of JSON on stdout (the summary: stderr)");
  app.add_option("--tls-ca", options.tls_ca,
                 "speak TLS and verify the server's certificate against this PEM CA file")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-server-name", options.tls_server_name,
                 "the name the server's certificate must carry (default: the host of --target)")
      ->needs("--tls-ca");
  try {
    app.parse(argc, argv);
    if (options.calls < options.concurrency)
      throw CLI::ValidationError("-n", "must be at least -c (every client makes a call)");
    if (options.concurrency > 1'000'000)
      throw CLI::ValidationError("-c", "at most 1000000 clients");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.threads = std::min<std::size_t>(options.threads, options.concurrency);
  raise_descriptor_limit();

  BenchmarkMessage request;
  tern::bench::fill_rpc_request(request);
  const std::size_t message_bytes = request.ByteSizeLong();
  const auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(options.timeout_s));

  // A client whose channel did not connect makes no call: each of its calls is an error.
  ErrorLog errors;
  const std::shared_ptr<grpc::ChannelCredentials> credentials = channel_credentials(options);
  if (!credentials) {
    std::fprintf(stderr, "grpc_rpc_client: cannot read %s\n", options.tls_ca.c_str());
    return 2;
  }
  std::vector<Caller> callers = open_callers(options, credentials);
  std::vector<std::unique_ptr<Worker>> workers;
  for (std::size_t i = 0; i < options.threads; ++i)
    workers.push_back(std::make_unique<Worker>(request, timeout));
  for (std::uint64_t i = 0; i < options.concurrency; ++i) {
    callers[i].remaining =
        options.calls / options.concurrency + (i < options.calls % options.concurrency ? 1 : 0);
    if (callers[i].connected) {
      workers[i % options.threads]->add(&callers[i]);
      continue;
    }
    errors.add(std::string("connect: channel not ready before the deadline (") +
                   state_name(callers[i].channel->GetState(false)) + ")",
               callers[i].remaining);
    callers[i].remaining = 0;
  }

  Progress progress(workers);
  progress.start();
  const Clock::time_point begin = Clock::now();
  std::vector<std::thread> threads;
  for (auto& worker : workers) threads.emplace_back([&worker] { worker->run(); });
  for (std::thread& thread : threads) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  progress.stop();

  std::vector<std::uint64_t> latencies;
  latencies.reserve(options.calls);
  for (auto& worker : workers) {
    latencies.insert(latencies.end(), worker->latencies().begin(), worker->latencies().end());
    errors.merge(worker->errors());
  }
  callers.clear();
  const std::uint64_t verified_calls = latencies.size();
  const std::optional<grpc_rpc::LatencyFigures> figures = grpc_rpc::summarize(latencies);
  const double tps = elapsed > 0 ? static_cast<double>(verified_calls) / elapsed : 0;
  const bool verified = errors.count() == 0 && verified_calls == options.calls;

  nlohmann::ordered_json out;
  out["tool"] = options.peer;
  out["mode"] = "rpc";
  const std::string scheme = options.tls_ca.empty() ? "tcp://" : "tls://";
  out["target"] = scheme + options.target;
  out["params"] = {{"concurrency", options.concurrency},
                   {"calls", options.calls},
                   {"message_bytes", message_bytes}};
  nlohmann::ordered_json& figures_json = out["figures"];
  figures_json["calls"] = verified_calls;
  figures_json["tps"] = rounded(tps, 1);
  const auto put = [&](const char* key, double value) {
    figures_json[key] = figures ? nlohmann::ordered_json(rounded(value, 3)) : nullptr;
  };
  const grpc_rpc::LatencyFigures f = figures.value_or(grpc_rpc::LatencyFigures{});
  put("mean_us", f.mean_us);
  put("p50_us", f.p50_us);
  put("p90_us", f.p90_us);
  put("p99_us", f.p99_us);
  put("p999_us", f.p999_us);
  put("min_us", f.min_us);
  put("max_us", f.max_us);
  figures_json["elapsed_s"] = rounded(elapsed, 3);
  out["errors"] = errors.count();
  out["verified"] = verified;
  out["error_messages"] = errors.messages();

  std::FILE* text = options.json ? stderr : stdout;
  std::fprintf(text,
               "%s rpc: %s%s, %llu clients (own connection each), %llu calls, %zu-byte "
               "request, %zu client thread(s)\n",
               options.peer.c_str(), scheme.c_str(), options.target.c_str(),
               static_cast<unsigned long long>(options.concurrency),
               static_cast<unsigned long long>(options.calls), message_bytes, options.threads);
  std::fprintf(text, "  %llu verified replies in %.3f s: %.1f calls/s\n",
               static_cast<unsigned long long>(verified_calls), elapsed, tps);
  if (figures) {
    std::fprintf(text,
                 "  latency us: mean %.1f, p50 %.1f, p90 %.1f, p99 %.1f, p99.9 %.1f, min %.1f, "
                 "max %.1f\n",
                 f.mean_us, f.p50_us, f.p90_us, f.p99_us, f.p999_us, f.min_us, f.max_us);
  }
  if (verified) {
    std::fprintf(text, "  verified: yes, 0 errors\n");
  } else {
    std::fprintf(text, "  FAILED: %llu error(s), %llu of %llu calls verified\n",
                 static_cast<unsigned long long>(errors.count()),
                 static_cast<unsigned long long>(verified_calls),
                 static_cast<unsigned long long>(options.calls));
    for (const std::string& message : errors.messages())
      std::fprintf(text, "    %s\n", message.c_str());
  }
  std::fflush(text);
  if (options.json) {
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
  }
  return verified ? 0 : 1;
}
