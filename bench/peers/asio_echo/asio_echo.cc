// asio_echo: the peer echo server of the pingpong benchmark (report 003,
// docs/benchmark-methods.md), written with standalone asio (Debian's libasio-dev) in asio's classic
// style: per connection, an async_read_some into a block-sized buffer, an async_write of the bytes
// read, repeat. With --tls-cert and --tls-key every connection runs over asio::ssl (OpenSSL, the
// same library as tern's TLS): the handshake first, then the same loop on the ssl::stream.
//
//   asio_echo [--host 127.0.0.1] [--port 0] [--threads 1] [--block 16384]
//             [--model contexts|shared] [--duration 0] [--tls-cert FILE --tls-key FILE]
//
// Threads: 1 runs one io_context on one thread. N > 1 runs either N io_contexts, each on its own
// thread with its own SO_REUSEPORT acceptor (--model contexts, the default: the faster on
// loopback, see bench/suite/run.py), or one io_context run by N threads (--model shared).
// Prints "asio_echo: listening on HOST:PORT ..." once it accepts; stops on SIGINT/SIGTERM or
// after --duration seconds.

#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using asio::ip::tcp;

struct Config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::size_t threads = 1;
  std::size_t block = 16 * 1024;
  std::string model = "contexts";
  double duration = 0;
  std::string tls_cert;
  std::string tls_key;
};

// One connection over Stream (a tcp::socket, or an ssl::stream over one): reads what is there
// into its block, writes exactly those bytes back, repeats until the peer closes or an error.
// Lives as long as an operation of it is pending.
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream socket, std::size_t block) : socket_(std::move(socket)), data_(block) {}

  void start() {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      receive();
    } else {
      socket_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](std::error_code error) {
                                if (!error) self->receive();
                              });
    }
  }

 private:
  void receive() {
    socket_.async_read_some(asio::buffer(data_), [self = this->shared_from_this()](
                                                     std::error_code error, std::size_t n) {
      if (!error)
        self->reply(n);
      else if (error == asio::error::eof)
        self->finish();
    });
  }

  void reply(std::size_t n) {
    asio::async_write(socket_, asio::buffer(data_.data(), n),
                      [self = this->shared_from_this()](std::error_code error, std::size_t) {
                        if (!error) self->receive();
                      });
  }

  // The peer closed cleanly: over TLS, answer its close_notify with ours.
  void finish() {
    if constexpr (!std::is_same_v<Stream, tcp::socket>)
      socket_.async_shutdown([self = this->shared_from_this()](std::error_code) {});
  }

  Stream socket_;
  std::vector<char> data_;
};

// Accepts connections on one acceptor and starts a Session on the acceptor's io_context.
class Listener {
 public:
  // tls: null for plaintext, else the server context every connection's handshake uses.
  Listener(asio::io_context& context, const tcp::endpoint& endpoint, bool reuse_port,
           std::size_t block, asio::ssl::context* tls)
      : acceptor_(context), block_(block), tls_(tls) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    if (reuse_port) {
      const int on = 1;
      if (::setsockopt(acceptor_.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
        throw std::system_error(errno, std::system_category(), "setsockopt(SO_REUSEPORT)");
    }
    acceptor_.bind(endpoint);
    acceptor_.listen(asio::socket_base::max_listen_connections);
  }

  tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
  void start() { accept(); }
  void close() {
    std::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  void accept() {
    acceptor_.async_accept([this](std::error_code error, tcp::socket socket) {
      if (error == asio::error::operation_aborted) return;
      if (!error) {
        std::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        if (tls_ == nullptr) {
          std::make_shared<Session<tcp::socket>>(std::move(socket), block_)->start();
        } else {
          using TlsStream = asio::ssl::stream<tcp::socket>;
          std::make_shared<Session<TlsStream>>(TlsStream(std::move(socket), *tls_), block_)
              ->start();
        }
      }
      accept();
    });
  }

  tcp::acceptor acceptor_;
  std::size_t block_;
  asio::ssl::context* tls_;
};

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{
      "asio_echo: a minimal standalone-asio echo server (the pingpong peer of report 003).\n"
      "Per connection: async_read_some into a block, async_write the bytes back, repeat.\n"
      "Prints 'asio_echo: listening on HOST:PORT' when ready; stops on SIGINT/SIGTERM or after\n"
      "--duration seconds."};
  app.add_option("--host", config.host, "IPv4/IPv6 address to listen on")->capture_default_str();
  app.add_option("-p,--port", config.port, "TCP port (0: the kernel picks; printed at start)")
      ->capture_default_str();
  app.add_option("-t,--threads", config.threads, "threads running io_contexts (>= 1)")
      ->capture_default_str();
  app.add_option("-b,--block,--buf", config.block, "read buffer (block) per connection, bytes")
      ->capture_default_str();
  app.add_option("--model", config.model,
                 "with threads > 1: contexts (an io_context and a SO_REUSEPORT acceptor per "
                 "thread) or shared (one io_context run by every thread)")
      ->capture_default_str();
  app.add_option("--duration", config.duration, "stop after this many seconds (0: on a signal)");
  app.add_option("--tls-cert", config.tls_cert,
                 "serve TLS (asio::ssl) with this PEM certificate chain (with --tls-key)");
  app.add_option("--tls-key", config.tls_key, "the PEM private key of --tls-cert");
  CLI11_PARSE(app, argc, argv);
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    std::fprintf(stderr, "asio_echo: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (config.threads == 0) config.threads = 1;
  if (config.block == 0) config.block = 1;
  if (config.model != "contexts" && config.model != "shared") {
    std::fprintf(stderr, "asio_echo: --model %s: expected contexts or shared\n",
                 config.model.c_str());
    return 2;
  }

  try {
    const bool per_thread = config.model == "contexts" && config.threads > 1;
    const std::size_t context_count = per_thread ? config.threads : 1;
    // The concurrency hint 1 lets asio drop its internal locking when one thread runs a context.
    const int hint = per_thread || config.threads == 1 ? 1 : static_cast<int>(config.threads);
    std::vector<std::unique_ptr<asio::io_context>> contexts;
    for (std::size_t i = 0; i < context_count; ++i)
      contexts.push_back(std::make_unique<asio::io_context>(hint));

    // OpenSSL's defaults, as a plain asio::ssl server has them: TLS 1.2 and 1.3, session
    // tickets on, X25519 first.
    std::optional<asio::ssl::context> tls;
    if (!config.tls_cert.empty()) {
      tls.emplace(asio::ssl::context::tls_server);
      tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
      tls->use_certificate_chain_file(config.tls_cert);
      tls->use_private_key_file(config.tls_key, asio::ssl::context::pem);
    }
    std::vector<std::unique_ptr<Listener>> listeners;
    tcp::endpoint endpoint(asio::ip::make_address(config.host), config.port);
    for (std::size_t i = 0; i < context_count; ++i) {
      listeners.push_back(std::make_unique<Listener>(*contexts[i], endpoint, per_thread,
                                                     config.block, tls ? &*tls : nullptr));
      endpoint = listeners.front()->local_endpoint();  // the others share the port picked first
    }

    auto stop_all = [&contexts] {
      for (auto& context : contexts) context->stop();
    };
    asio::signal_set signals(*contexts[0], SIGINT, SIGTERM);
    signals.async_wait([&](std::error_code, int) { stop_all(); });
    asio::steady_timer timer(*contexts[0]);
    if (config.duration > 0) {
      timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(config.duration)));
      timer.async_wait([&](std::error_code error) {
        if (!error) stop_all();
      });
    }
    for (auto& listener : listeners) listener->start();

    std::printf("asio_echo: listening on %s:%u (%zu threads, %s, block %zu, %s, asio %d.%d.%d)\n",
                endpoint.address().to_string().c_str(), endpoint.port(), config.threads,
                per_thread ? "an io_context per thread" : "one io_context", config.block,
                tls ? OpenSSL_version(OPENSSL_VERSION) : "plaintext", ASIO_VERSION / 100000,
                ASIO_VERSION / 100 % 1000, ASIO_VERSION % 100);
    std::fflush(stdout);

    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < config.threads; ++i) {
      asio::io_context& context = *contexts[per_thread ? i : 0];
      threads.emplace_back([&context] { context.run(); });
    }
    contexts[0]->run();
    stop_all();
    for (std::thread& thread : threads) thread.join();
    std::printf("asio_echo: stopped\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asio_echo: %s\n", e.what());
    return 1;
  }
  return 0;
}
