// The admin endpoint's server: an acceptor fiber and a fiber per connection on one worker, each
// connection answered once and closed; and the runtime start hook that serves TERN_ADMIN.
#include "tern/admin/admin_server.h"

#include <sys/socket.h>

#include <netinet/in.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "admin_http.h"
#include "admin_pages.h"
#include "tern/base/assert.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/log/log.h"
#include "tern/log/peer_log.h"
#include "tern/net/tcp_listener.h"
#include "tern/prof/metrics.h"

namespace tern::admin {

using net::Address;
using net::TcpListener;
using net::TcpStream;

namespace {

using namespace std::chrono_literals;

// Waits for group even if the calling fiber is interrupted (what it waits for ends anyway).
void wait_all(WaitGroup& group) {
  while (!group.wait()) this_fiber::yield();
}

void count_response(int status) {
  prof::MetricsRegistry::global()
      .counter("tern_admin_requests_total", "Requests the admin endpoint answered, by status",
               {{"code", std::to_string(status)}})
      .add();
}

// An accepted connection served as plain HTTP.
class PlainConnection final : public AdminConnection {
 public:
  explicit PlainConnection(TcpStream& stream) noexcept : stream_(stream) {}
  Result<std::size_t> read(std::span<std::byte> buf, Deadline deadline) override {
    return stream_.read(buf, deadline);
  }
  Result<void> write_all(std::span<const std::byte> buf, Deadline deadline) override {
    return stream_.write_all(buf, deadline);
  }
  Result<void> shutdown(Deadline) override { return stream_.shutdown(SHUT_WR); }

 private:
  TcpStream& stream_;
};

// Writes the response, half-closes, and reads what the peer still sends until it closes (so
// the close does not reset the connection before the peer has read the response).
void respond_and_close(AdminConnection& stream, const detail::AdminPage& page, bool head_only,
                       Deadline deadline) {
  const std::string response = detail::http_response(page.status, page.content_type, page.body,
                                                     head_only, page.extra_headers);
  count_response(page.status);
  if (!stream.write_all(std::as_bytes(std::span(response)), deadline)) return;
  (void)stream.shutdown(deadline);
  const Deadline linger = std::min(deadline, deadline_after(1s));
  std::array<std::byte, 4096> sink;
  for (;;) {
    Result<std::size_t> n = stream.read(sink, linger);
    if (!n || *n == 0) return;
  }
}

// Whether the address is a loopback one (127.0.0.0/8, ::1, IPv4 loopback mapped to IPv6, or a
// Unix socket).
bool is_loopback(const Address& address) {
  if (address.family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address.data());
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address.family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address.data());
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) && v6->sin6_addr.s6_addr[12] == 127;
  }
  return address.is_unix();
}

// The 401 answer to a request without the token (or with another one).
detail::AdminPage unauthorized_page(bool token_presented) {
  detail::AdminPage page = detail::admin_error_page(401);
  page.body = "401 Unauthorized: send the admin token as 'Authorization: Bearer <token>'\n";
  page.extra_headers =
      token_presented ? "WWW-Authenticate: Bearer realm=\"tern-admin\", error=\"invalid_token\"\r\n"
                      : "WWW-Authenticate: Bearer realm=\"tern-admin\"\r\n";
  return page;
}

// Reads one request head from `stream` by `deadline` and answers it.
void serve_request(AdminConnection& stream, const AdminOptions& options, const std::string& token,
                   Deadline deadline) {
  std::string received;
  std::array<std::byte, 4096> chunk;
  for (;;) {
    const detail::HeadParse parsed = detail::parse_request_head(received, options.max_head_bytes);
    switch (parsed.state) {
      case detail::HeadState::complete:
        if (!token.empty() && !detail::bearer_token_matches(parsed.request.authorization, token)) {
          respond_and_close(stream, unauthorized_page(!parsed.request.authorization.empty()),
                            parsed.request.method == "HEAD",
                            deadline_after(options.request_timeout));
          return;
        }
        respond_and_close(stream, detail::admin_page(parsed.request.method, parsed.request.path),
                          parsed.request.method == "HEAD", deadline_after(options.request_timeout));
        return;
      case detail::HeadState::malformed:
        respond_and_close(stream, detail::admin_error_page(400), false, deadline);
        return;
      case detail::HeadState::too_large:
        respond_and_close(stream, detail::admin_error_page(431), false, deadline);
        return;
      case detail::HeadState::incomplete:
        break;
    }
    Result<std::size_t> n = stream.read(chunk, deadline);
    if (!n) {
      if (n.error() == std::errc::timed_out)
        respond_and_close(stream, detail::admin_error_page(408), false, deadline_after(1s));
      return;  // a reset, a TLS error, or the runtime is shutting down
    }
    if (*n == 0) return;  // the peer left before finishing its request: nobody to answer
    received.append(reinterpret_cast<const char*>(chunk.data()), *n);
  }
}

// Runs the transport's handshake (if any) and the request, all within `head_timeout` of the
// accept. A failed handshake is logged (rate limited) and counted.
void serve_connection(TcpStream& stream, const AdminOptions& options, const std::string& token,
                      std::chrono::milliseconds head_timeout) {
  const Deadline deadline = deadline_after(head_timeout);
  if (!options.transport.accept) {
    PlainConnection plain(stream);
    serve_request(plain, options, token, deadline);
    return;
  }
  const Result<Address> peer = stream.peer_address();
  Result<std::unique_ptr<AdminConnection>> wrapped =
      options.transport.accept(std::move(stream), deadline);
  if (!wrapped) {
    if (wrapped.error() == std::errc::operation_canceled) return;  // stopping
    prof::MetricsRegistry::global()
        .counter("tern_admin_handshake_failures_total",
                 "Admin connections closed before their request because the transport's "
                 "handshake (TLS) failed or timed out")
        .add();
    TERN_PEER_LOG_WARN("admin endpoint: {} client {} refused: {}", options.transport.scheme,
                       peer ? peer->to_string() : std::string("(unknown)"),
                       wrapped.error().message());
    return;
  }
  serve_request(**wrapped, options, token, deadline);
}

// The token `options` ask for: token, else token_file's content without surrounding blanks and
// line ends (empty: none); an error names the file or what is wrong with the token.
Result<std::string> resolve_token(const AdminOptions& options) {
  std::string token = options.token;
  if (token.empty() && !options.token_file.empty()) {
    errno = 0;
    std::ifstream in(options.token_file, std::ios::binary);
    if (!in) {
      const std::error_code why(errno != 0 ? errno : ENOENT, std::generic_category());
      return fail(with_explanation(
          why, "admin token file " + options.token_file + ": cannot open it: " + why.message()));
    }
    token.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!token.empty() && blank(token.back())) token.pop_back();
    std::size_t first = 0;
    while (first < token.size() && blank(token[first])) ++first;
    token.erase(0, first);
    if (token.empty())
      return fail(with_explanation(std::make_error_code(std::errc::invalid_argument),
                                   "admin token file " + options.token_file + " is empty"));
  }
  for (char c : token) {
    if (c <= 0x20 || c >= 0x7f)
      return fail(with_explanation(std::make_error_code(std::errc::invalid_argument),
                                   "admin token: only visible ASCII characters, no blanks"));
  }
  return token;
}

// Where runtimes started by the start hook serve their admin endpoint.
struct RuntimeEndpoints {
  std::mutex mutex;
  std::vector<std::pair<const Runtime*, Address>> endpoints;
};

RuntimeEndpoints& runtime_endpoints() {
  static RuntimeEndpoints* instance = new RuntimeEndpoints;  // never destroyed: used at exit
  return *instance;
}

}  // namespace

// Serves the admin endpoint the options (or TERN_ADMIN) ask for until the runtime shuts down.
// The runtime start hook; worker 0.
void serve_runtime_admin_hook(const RuntimeOptions& options) {
  std::string text;
  const bool from_environment = !options.admin_address;
  if (options.admin_address) {
    text = *options.admin_address;
  } else if (const char* value = std::getenv("TERN_ADMIN")) {
    text = value;
  }
  if (text.empty()) return;
  this_fiber::set_name("tern-admin");
  std::string why;
  Result<Address> address = Address::parse(text, &why);
  if (!address) {
    // A bad TERN_ADMIN is fatal, as a bad value of every TERN_ variable is (docs/guide.md).
    if (from_environment) {
      TERN_FATAL(
          "TERN_ADMIN='{}' is not valid: expected an address such as 127.0.0.1:9100 or :9100 "
          "(unset means no admin endpoint): {}",
          text, why);
    }
    TERN_LOG_ERROR("admin endpoint not started: '{}' is not an address ({})", text, why);
    return;
  }
  AdminServer server;
  Result<Address> bound = server.start(*address);
  if (!bound) {
    // The message names the step and the address ("bind 127.0.0.1:9100: Address already in use").
    TERN_LOG_ERROR("admin endpoint not started: {}", bound.error().message());
    return;
  }
  TERN_LOG_INFO("admin endpoint on http://{}/ (/metrics, /status)", bound->to_string());
  const Runtime* runtime = Runtime::current();
  RuntimeEndpoints& endpoints = runtime_endpoints();
  {
    std::lock_guard lock(endpoints.mutex);
    endpoints.endpoints.emplace_back(runtime, *bound);
  }
  while (this_fiber::sleep_until(kNoDeadline)) {
  }
  {
    std::lock_guard lock(endpoints.mutex);
    std::erase_if(endpoints.endpoints, [runtime](const auto& e) { return e.first == runtime; });
  }
  server.stop();
}

struct AdminServer::State {
  AdminOptions options;
  std::string token;  // empty: none asked
  TcpListener listener;
  WaitGroup fibers;  // the acceptor and every connection
  std::size_t open = 0;
  Event slot_freed;  // set when a connection ends (or at stop)
  bool stopping = false;
};

AdminServer::AdminServer(AdminOptions options) : options_(options) {}

AdminServer::~AdminServer() {
  if (state_ != nullptr)
    TERN_FATAL("tern::admin::AdminServer destroyed while running; call stop() first");
}

Result<Address> AdminServer::start(const Address& address) {
  Result<std::string> token = resolve_token(options_);
  if (!token) return fail(token.error());
  Result<TcpListener> listener = TcpListener::bind(address);
  if (!listener) return fail(listener.error());
  Result<Address> bound = listener->local_address();
  if (!bound) return fail(bound.error());
  if (!is_loopback(*bound)) {
    const bool tls = static_cast<bool>(options_.transport.accept);
    const char* protection =
        tls ? (token->empty() ? "over TLS but without a token: anyone who completes a handshake "
                                "can read /metrics and /status"
                              : "over TLS and with a token")
            : (token->empty() ? "with neither TLS nor a token: /metrics and /status are open to "
                                "anyone who can connect"
                              : "with a token but no TLS: the token crosses the network in clear "
                                "text");
    TERN_LOG_WARN(
        "admin endpoint on {} ({}) is reachable from other hosts, {} (bind 127.0.0.1 to "
        "keep it local)",
        bound->to_string(), options_.transport.scheme, protection);
  }
  auto state = std::make_shared<State>();
  state->options = options_;
  state->token = std::move(*token);
  state->listener = std::move(*listener);
  state->fibers.add();
  spawn(
      [state] {
        while (!state->stopping) {
          const std::size_t limit = std::max<std::size_t>(state->options.max_connections, 1);
          if (state->open >= limit) {
            // Every slot is busy: leave new connections in the backlog until one ends.
            state->slot_freed.reset();
            (void)state->slot_freed.wait();
            continue;
          }
          Result<TcpStream> stream = state->listener.accept();
          if (!stream) {
            if (stream.error() == std::errc::operation_canceled || state->stopping) break;
            (void)this_fiber::sleep_for(10ms);  // out of descriptors: let some free up
            continue;
          }
          // The last free slot goes to a connection that must be quick about its head.
          const std::chrono::milliseconds head_timeout =
              state->open + 1 == limit
                  ? std::min(state->options.head_timeout, state->options.reserved_head_timeout)
                  : state->options.head_timeout;
          ++state->open;
          state->fibers.add();
          spawn(
              [state, head_timeout, s = std::move(*stream)]() mutable {
                serve_connection(s, state->options, state->token, head_timeout);
                s.close();
                --state->open;
                state->slot_freed.set();
                state->fibers.done();
              },
              {.name = "tern-admin-conn"})
              .detach();
        }
        state->fibers.done();
      },
      {.name = "tern-admin-accept"})
      .detach();
  state_ = std::move(state);
  return bound;
}

void AdminServer::stop() {
  if (state_ == nullptr) return;
  state_->stopping = true;
  state_->slot_freed.set();
  state_->listener.close();
  wait_all(state_->fibers);
  state_.reset();
}

std::optional<Address> runtime_admin_address() {
  const Runtime* runtime = Runtime::current();
  RuntimeEndpoints& endpoints = runtime_endpoints();
  std::lock_guard lock(endpoints.mutex);
  for (const auto& [owner, address] : endpoints.endpoints)
    if (owner == runtime) return address;
  return std::nullopt;
}

}  // namespace tern::admin

namespace {

// Every runtime of a program that links tern::admin serves TERN_ADMIN (or
// RuntimeOptions::admin_address). tern::tern links the whole tern::admin archive, so this
// registration is kept even though nothing calls into this file (src/CMakeLists.txt).
[[maybe_unused]] const bool registered = [] {
  tern::add_runtime_start_hook(&tern::admin::serve_runtime_admin_hook);
  return true;
}();

}  // namespace
