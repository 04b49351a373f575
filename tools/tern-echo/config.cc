#include "config.h"

#include "../common/admin_option.h"
#include "../common/idle_poll_option.h"

namespace tern::echo {

namespace {

constexpr std::size_t kMinBuf = 64;

// Parses --mode (after --discard), or nullopt.
std::optional<EchoMode> parse_mode(const std::string& text) {
  if (text == "echo") return EchoMode::echo;
  if (text == "discard") return EchoMode::discard;
  if (text == "frame16") return EchoMode::frame16;
  if (text == "ttcp") return EchoMode::ttcp;
  return std::nullopt;
}

}  // namespace

const char* to_string(EchoMode mode) noexcept {
  switch (mode) {
    case EchoMode::echo:
      return "echo";
    case EchoMode::discard:
      return "discard";
    case EchoMode::frame16:
      return "frame16";
    case EchoMode::ttcp:
      return "ttcp";
  }
  return "echo";
}

std::optional<EchoConfig> validate_options(const EchoOptions& options, std::string& why) {
  EchoConfig config;
  Result<io::BackendChoice> backend = io::parse_backend(options.io);
  if (!backend) {
    why = "--io " + options.io + ": expected epoll, uring or auto";
    return std::nullopt;
  }
  config.backend = *backend;
  const std::string mode_text = options.discard ? "discard" : options.mode;
  const std::optional<EchoMode> mode = parse_mode(mode_text);
  if (!mode) {
    why = "--mode " + mode_text + ": expected echo, discard, frame16 or ttcp";
    return std::nullopt;
  }
  config.mode = *mode;
  if (options.accept != "reuseport" && options.accept != "roundrobin") {
    why = "--accept " + options.accept + ": expected reuseport or roundrobin";
    return std::nullopt;
  }
  config.accept =
      options.accept == "roundrobin" ? net::AcceptMode::round_robin : net::AcceptMode::reuse_port;
  config.accept_name = options.accept;
  const std::string port = std::to_string(options.port);
  Result<net::Address> address = net::Address::parse(options.host.find(':') != std::string::npos
                                                         ? "[" + options.host + "]:" + port
                                                         : options.host + ":" + port,
                                                     &why);
  if (!address) return std::nullopt;
  config.address = *address;
  if (why = tools::check_admin_option(options.admin, config.admin); !why.empty())
    return std::nullopt;
  if (why = tools::check_admin_access(options.admin_access, config.admin.has_value(),
                                      config.admin_options);
      !why.empty())
    return std::nullopt;
  if (why = tools::check_idle_poll_option(options.idle_poll, config.idle_poll); !why.empty())
    return std::nullopt;
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    why = "--tls-cert and --tls-key go together";
    return std::nullopt;
  }
  if (!options.tls_cert.empty() && config.mode != EchoMode::echo) {
    why = "--tls-cert: TLS is served in --mode echo only";
    return std::nullopt;
  }
  if (options.stack_mode != "own" && options.stack_mode != "shared") {
    why = "--stack-mode " + options.stack_mode + ": expected own or shared";
    return std::nullopt;
  }
  config.stack_mode = options.stack_mode == "shared" ? StackMode::shared : StackMode::own;
  if (config.stack_mode == StackMode::shared && !options.tls_cert.empty()) {
    why = "--stack-mode shared serves plain TCP only, not --tls-cert";
    return std::nullopt;
  }
  config.tls_cert = options.tls_cert;
  config.tls_key = options.tls_key;
  config.threads = options.threads;
  config.buf = options.buf < kMinBuf ? kMinBuf : options.buf;
  config.max_connections = options.max_connections;
  config.duration_s = options.duration;
  config.max_payload = options.max_payload;
  config.idle_timeout = std::chrono::milliseconds(options.idle_timeout_ms);
  config.min_progress = options.min_progress;
  config.progress_interval = std::chrono::milliseconds(options.progress_interval_ms);
  return config;
}

}  // namespace tern::echo
