// grpc_rpc_server: the gRPC C++ peer server of report 001's RPC benchmark. It serves
// tern.bench.BenchmarkService/Say (bench/proto): decode the request, set field1 = "OK" and
// field2 = 100, encode it as the reply. Debian's gRPC, default settings; insecure credentials
// unless --tls-cert/--tls-key are given (then TLS through grpc::SslServerCredentials, no client
// certificate asked for). It also serves Pump, the streaming form (grpc_stream_client), with
// either API.
//
//   grpc_rpc_server [--host 127.0.0.1] [--port 0] [--threads 1] [--api sync|callback]
//                   [--tls-cert server.pem --tls-key server.key]
//
// --api sync: grpc::Service's synchronous API. --threads N gives the server N completion queues,
//   each polled by 1 to 2 threads (gRPC's own default pair); a handler runs on the thread that
//   polled its call, and gRPC starts more threads while handlers are busy.
// --api callback: the callback API (CallbackService, the default reactor). Handlers run on
//   gRPC's own threads, which gRPC sizes from the CPU count; gRPC 1.51 has no setting for them,
//   so --threads is accepted but does not apply (bound the CPUs with taskset instead).
// Prints "grpc_rpc_server: listening on HOST:PORT (...)" once it accepts; stops on SIGINT or
// SIGTERM and exits 0.

#include <pthread.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <grpcpp/grpcpp.h>

#include "benchmark_message.grpc.pb.h"
#include "rpc_message.h"

namespace {

using tern::bench::BenchmarkMessage;

// The synchronous API: gRPC hands over the decoded request and encodes the reply it returns.
class SyncBenchmarkService final : public tern::bench::BenchmarkService::Service {
 public:
  grpc::Status Say(grpc::ServerContext*, const BenchmarkMessage* request,
                   BenchmarkMessage* reply) override {
    *reply = *request;
    tern::bench::answer_rpc_request(*reply);
    return grpc::Status::OK;
  }
  // The streaming form: each message of the stream answered as Say answers it.
  grpc::Status Pump(grpc::ServerContext*,
                    grpc::ServerReaderWriter<BenchmarkMessage, BenchmarkMessage>* stream) override {
    BenchmarkMessage message;
    while (stream->Read(&message)) {
      tern::bench::answer_rpc_request(message);
      if (!stream->Write(message)) break;
    }
    return grpc::Status::OK;
  }
};

// The callback API: the same work, finished at once through the context's default reactor.
class CallbackBenchmarkService final : public tern::bench::BenchmarkService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Say(grpc::CallbackServerContext* context,
                                const BenchmarkMessage* request, BenchmarkMessage* reply) override {
    *reply = *request;
    tern::bench::answer_rpc_request(*reply);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerBidiReactor<BenchmarkMessage, BenchmarkMessage>* Pump(
      grpc::CallbackServerContext*) override {
    return new PumpReactor();
  }

 private:
  // One Pump stream: reads a message, writes its answer, and reads the next once the write is
  // done (the callback API allows one read and one write outstanding); deletes itself when done.
  class PumpReactor final : public grpc::ServerBidiReactor<BenchmarkMessage, BenchmarkMessage> {
   public:
    PumpReactor() { StartRead(&message_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      tern::bench::answer_rpc_request(message_);
      StartWrite(&message_);
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::CANCELLED);
        return;
      }
      StartRead(&message_);
    }
    void OnDone() override { delete this; }

   private:
    BenchmarkMessage message_;
  };
};

// Lets thousands of connections in: the soft descriptor limit goes up to the hard one.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

std::string host_port(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Insecure credentials without a certificate; TLS with the PEM certificate chain and key.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const std::string& cert_path,
                                                            const std::string& key_path) {
  if (cert_path.empty()) return grpc::InsecureServerCredentials();
  const std::optional<std::string> cert = read_file(cert_path);
  const std::optional<std::string> key = read_file(key_path);
  if (!cert || !key) {
    std::fprintf(stderr, "grpc_rpc_server: cannot read %s\n",
                 (!cert ? cert_path : key_path).c_str());
    return nullptr;
  }
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  int threads = 1;
  std::string api = "sync";
  std::string tls_cert;
  std::string tls_key;
  CLI::App app{
      "grpc_rpc_server: the gRPC C++ peer of report 001's RPC benchmark. Serves\n"
      "tern.bench.BenchmarkService/Say (reply = request with field1 \"OK\", field2 100).\n"
      "Prints 'grpc_rpc_server: listening on HOST:PORT' when ready; stops on SIGINT/SIGTERM."};
  app.add_option("--host", host, "address to listen on")->capture_default_str();
  app.add_option("--port", port, "TCP port (0: the kernel picks; printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--threads", threads,
                 "sync: completion queues (each polled by 1-2 threads); callback: not "
                 "applicable, gRPC sizes its own pool")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--api", api, "sync (grpc::Service) or callback (CallbackService)")
      ->check(CLI::IsMember({"sync", "callback"}))
      ->capture_default_str();
  CLI::Option* cert_option =
      app.add_option("--tls-cert", tls_cert, "serve TLS with this PEM certificate chain")
          ->check(CLI::ExistingFile);
  CLI::Option* key_option =
      app.add_option("--tls-key", tls_key, "the PEM private key of --tls-cert")
          ->check(CLI::ExistingFile);
  cert_option->needs(key_option);
  key_option->needs(cert_option);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  // Every thread gRPC starts inherits this mask, so only sigwait below sees the stop signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  raise_descriptor_limit();

  SyncBenchmarkService sync_service;
  CallbackBenchmarkService callback_service;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials = server_credentials(tls_cert, tls_key);
  if (!credentials) return 1;
  builder.AddListeningPort(host_port(host, port), credentials, &bound_port);
  if (api == "sync") {
    builder.RegisterService(&sync_service);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, threads);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  } else {
    builder.RegisterService(&callback_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    std::fprintf(stderr, "grpc_rpc_server: cannot listen on %s\n", host_port(host, port).c_str());
    return 1;
  }
  std::string details = api == "sync"
                            ? "api sync, " + std::to_string(threads) + " completion queue(s)"
                            : std::string("api callback, gRPC's thread pool");
  details += tls_cert.empty() ? ", plaintext" : ", TLS";
  std::printf("grpc_rpc_server: listening on %s (%s, gRPC %s)\n",
              host_port(host, bound_port).c_str(), details.c_str(), grpc::Version().c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  // Calls still running after a second are cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  std::printf("grpc_rpc_server: stopped\n");
  std::fflush(stdout);
  return 0;
}
