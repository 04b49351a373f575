#include "tern/tls/tls_stream.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <utility>

#include "buffer_bio.h"
#include "context_state.h"
#include "openssl_error.h"
#include "tern/base/assert.h"
#include "tern/fiber/mutex.h"
#include "tern/io/backend.h"
#include "tern/io/io.h"
#include "tern/prof/counter.h"
#include "tern/tls/tls_error.h"

namespace tern::tls {

namespace {

// Plaintext handed to SSL_write at a time: four full records, so a large write is encrypted
// and sent in pieces instead of buffered whole.
constexpr std::size_t kWriteChunk = 64 * 1024;
// The most plaintext a record carries: a write of no more is one record, which can leave
// straight from OpenSSL's buffer in one send.
constexpr std::size_t kMaxRecordData = 16 * 1024;
// Room for ciphertext read from the socket at a time: two whole records of the largest size
// (16 KiB of data and at most 256 bytes of header, padding and tag each).
constexpr std::size_t kReadChunk = 2 * (16 * 1024 + 256);

prof::Counter kernel_tls_connections(
    "tls.kernel_tls", "TLS connections whose records the kernel encrypts or decrypts (kTLS)");
prof::Counter user_space_tls_connections(
    "tls.user_space_tls", "TLS connections whose records OpenSSL encrypts in user space");
prof::Counter renegotiations_refused(
    "tls.renegotiations_refused",
    "TLS 1.2 connections closed because the peer asked to renegotiate");

bool is_ip_address(const std::string& name) {
  unsigned char address[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), address) == 1 ||
         inet_pton(AF_INET6, name.c_str(), address) == 1;
}

bool is_certificate_reason(int reason) {
  switch (reason) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct TlsStream::Impl {
  net::TcpStream tcp;
  std::shared_ptr<detail::ContextState> state;
  std::shared_ptr<const detail::Generation> generation;
  detail::SslLink link;
  SSL* ssl = nullptr;
  // The ciphertext both ways, read from and written to the socket in place. Its buffers grow
  // on first use, the output ones only as large as the largest flush so far.
  detail::BufferBio buffers;
  Mutex write_mutex;  // one flush at a time, so records leave in order
  // The part of the last taken output that a try_write could not send: it leaves before any
  // output taken later (it points into the BIO's sending buffer, untouched until then).
  std::span<const std::byte> unsent_output;
  // OpenSSL reads and writes the socket itself (a socket BIO): the handshake of a context with
  // kernel_tls, and the whole connection once the kernel took its records. The stream then
  // waits on the reactor for readiness when OpenSSL wants to read or write.
  bool on_socket = false;
  // write() sends a record from OpenSSL's buffer (encrypt's send_now): on epoll, where a send
  // is that system call anyway; io_uring batches the sends of a loop turn in one submission.
  bool sends_directly = false;
  bool kernel = false;     // the kernel encrypts or decrypts this connection's records
  bool eof = false;        // the socket read end of stream
  std::error_code broken;  // a fatal error: every later call fails with it

  ~Impl() {
    // OpenSSL forgets the session of a connection freed without close_notify, unless it is
    // told the close was ours: a stream dropped without an error stays resumable.
    if (ssl != nullptr && !broken && SSL_is_init_finished(ssl))
      SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_SENT_SHUTDOWN);
    SSL_free(ssl);
  }

  // Makes the SSL over the stream's buffers. Worker fibers only.
  Result<void> set_up(const TlsContext& context);
  Result<void> flush(Deadline deadline);
  Result<void> fill(Deadline deadline);
  Result<void> handshake(Deadline deadline);
  // A server's resumed handshake sends no new ticket unless the context reissues them
  // (ServerConfig::reissue_tickets); called while the handshake waits to read.
  void keep_ticket_if_resumed();
  // After a handshake on the socket: keeps it there if the kernel took the records, else
  // moves the SSL onto the stream's buffers (user-space TLS); counts the path taken.
  void settle_record_path();
  // Waits for the socket as OpenSSL's `ssl_error` asks (on_socket only).
  Result<void> wait_socket(int ssl_error, Deadline deadline);
  // SSL_write_ex of buf (at most kWriteChunk), waiting for the socket when OpenSSL writes to it.
  // `send_now`: a buf of one record with nothing queued before it is sent from OpenSSL's buffer
  // as it is sealed (saving a copy into ours); what the socket does not take stays queued.
  Result<std::size_t> encrypt(std::span<const std::byte> buf, Deadline deadline,
                              bool send_now = false);
  std::error_code handshake_error(int ssl_error);
  Result<std::size_t> read(std::span<std::byte> buf, Deadline deadline);
  Result<void> write(std::span<const std::byte> buf, Deadline deadline);
  Result<std::size_t> try_write(std::span<const std::byte> buf);
  // Sends what a failing call left in `out` (an alert), without waiting long for it.
  void send_alert();
};

Result<void> TlsStream::Impl::flush(Deadline deadline) {
  // Another fiber may be sending (a writer while we read): wait for it, within our deadline.
  if (!write_mutex.try_lock_until(deadline)) return fail(deadline_exceeded());
  std::lock_guard lock(write_mutex, std::adopt_lock);
  // What OpenSSL writes while this fiber is parked in the socket write (a reader's alert or
  // ticket) goes to the other buffer and leaves on the next turn.
  while (!unsent_output.empty() || buffers.output_pending() > 0) {
    std::span<const std::byte> output = unsent_output;
    unsent_output = {};
    if (output.empty()) output = buffers.take_output();
    if (Result<void> sent = tcp.write_all(output, deadline); !sent) {
      // Part of a record may have left: the stream cannot go on.
      broken = sent.error();
      return sent;
    }
  }
  return {};
}

Result<void> TlsStream::Impl::fill(Deadline deadline) {
  Result<std::size_t> n = tcp.read(buffers.input_space(kReadChunk), deadline);
  if (!n) return fail(n.error());
  if (*n == 0) {
    eof = true;
    buffers.set_eof();  // OpenSSL now sees the end of the stream
    return {};
  }
  buffers.input_added(*n);
  return {};
}

void TlsStream::Impl::send_alert() {
  if (buffers.output_pending() == 0 || !tcp.is_open()) return;
  (void)flush(deadline_after(std::chrono::milliseconds(100)));  // best effort: we are failing
}

std::error_code TlsStream::Impl::handshake_error(int ssl_error) {
  const int reason = detail::first_openssl_reason();
  std::string detail = detail::drain_openssl_errors();
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    std::string text = X509_verify_cert_error_string(verify);
    if (!detail.empty()) text += " (" + detail + ")";
    return detail::tls_error(TlsErrc::certificate, "TLS handshake", text);
  }
  if (is_certificate_reason(reason))
    return detail::tls_error(TlsErrc::certificate, "TLS handshake", detail);
  if (eof && (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING || detail.empty()))
    return detail::tls_error(TlsErrc::truncated, "TLS handshake",
                             "the peer closed the connection before the handshake finished");
  if (detail.empty())
    detail = ssl_error == SSL_ERROR_SYSCALL ? "socket error" : "unknown OpenSSL error";
  return detail::tls_error(TlsErrc::handshake, "TLS handshake", detail);
}

Result<void> TlsStream::Impl::wait_socket(int ssl_error, Deadline deadline) {
  return ssl_error == SSL_ERROR_WANT_WRITE ? io::wait_writable(tcp.fd(), deadline)
                                           : io::wait_readable(tcp.fd(), deadline);
}

void TlsStream::Impl::settle_record_path() {
  kernel = BIO_get_ktls_send(SSL_get_wbio(ssl)) == 1 || BIO_get_ktls_recv(SSL_get_rbio(ssl)) == 1;
  if (kernel) {
    kernel_tls_connections.add();
    return;
  }
  // The kernel refused (no "tls" ULP, or a cipher it lacks): OpenSSL never reads past the
  // record it needs, so nothing of the peer's is left in the socket BIO and the SSL moves.
  if (BIO* bio = buffers.make_bio(); bio != nullptr) {
    SSL_set_bio(ssl, bio, bio);
    on_socket = false;
  }
  user_space_tls_connections.add();
}

Result<std::size_t> TlsStream::Impl::encrypt(std::span<const std::byte> buf, Deadline deadline,
                                             bool send_now) {
  const std::size_t chunk = std::min(buf.size(), kWriteChunk);
  // Sending from OpenSSL's buffer needs the write turn (no send of ours in flight) and nothing
  // queued that must leave first.
  const bool direct = send_now && !on_socket && chunk <= kMaxRecordData && unsent_output.empty() &&
                      buffers.output_pending() == 0 && write_mutex.try_lock();
  for (;;) {
    detail::clear_stale_openssl_errors();
    std::size_t written = 0;
    if (direct) buffers.send_directly(tcp.fd());
    const int ok = SSL_write_ex(ssl, buf.data(), chunk, &written);
    if (direct) {
      buffers.send_directly(-1);
      write_mutex.unlock();
    }
    if (ok == 1) return written;
    const int error = SSL_get_error(ssl, ok);
    if (on_socket && (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ)) {
      // Retried with the same bytes, as OpenSSL asks.
      if (Result<void> ready = wait_socket(error, deadline); !ready) {
        broken = ready.error();
        return fail(with_context(ready.error(), "TLS write"));
      }
      continue;
    }
    std::string detail = detail::drain_openssl_errors();
    broken = detail::tls_error(TlsErrc::protocol, "TLS write",
                               detail.empty() ? "unknown OpenSSL error" : detail);
    send_alert();
    return fail(broken);
  }
}

void TlsStream::Impl::keep_ticket_if_resumed() {
  // OpenSSL decides to resume when it reads the ClientHello and writes a TLS 1.3 server's new
  // ticket after the client's Finished, so the count set in between is the one it uses.
  if (state->server && !state->server_config.reissue_tickets && SSL_session_reused(ssl) == 1)
    SSL_set_num_tickets(ssl, 0);
}

Result<void> TlsStream::Impl::handshake(Deadline deadline) {
  for (;;) {
    detail::clear_stale_openssl_errors();
    const int done = SSL_do_handshake(ssl);
    if (done == 1) {
      if (on_socket)
        settle_record_path();
      else
        user_space_tls_connections.add();
      // A TLS 1.3 server's tickets stay in the buffers: they leave with the first reply, or
      // before the first read waits, in one socket write with it (the client wakes once for
      // both, and nothing waits for them). What else a handshake wrote last, the peer waits
      // for (a client's Finished, a TLS 1.2 server's Finished): it leaves now.
      if (SSL_is_server(ssl) == 1 && SSL_version(ssl) == TLS1_3_VERSION) return {};
      return flush(deadline);
    }
    const int error = SSL_get_error(ssl, done);
    if (error == SSL_ERROR_WANT_READ) keep_ticket_if_resumed();
    if (on_socket && (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE)) {
      if (Result<void> ready = wait_socket(error, deadline); !ready) {
        broken = ready.error();
        return fail(with_context(ready.error(), "TLS handshake"));
      }
      continue;
    }
    if (on_socket) eof = BIO_eof(SSL_get_rbio(ssl)) == 1;
    if (error == SSL_ERROR_WANT_READ && !eof) {
      if (Result<void> sent = flush(deadline); !sent)
        return fail(with_context(sent.error(), "TLS handshake"));
      if (Result<void> got = fill(deadline); !got) {
        broken = got.error();
        return fail(with_context(got.error(), "TLS handshake"));
      }
      continue;
    }
    broken = handshake_error(error);
    send_alert();
    return fail(broken);
  }
}

Result<std::size_t> TlsStream::Impl::read(std::span<std::byte> buf, Deadline deadline) {
  if (broken) return fail(broken);
  if (buf.empty()) return 0;
  for (;;) {
    if (!on_socket && !eof && buffers.input_pending() == 0 && SSL_has_pending(ssl) == 0) {
      // Nothing received is left, not even part of a record: SSL_read would only find the
      // input dry, so the socket is read first (one SSL_read per record instead of two).
      if (buffers.output_pending() > 0) {
        if (Result<void> sent = flush(deadline); !sent) return fail(sent.error());
      }
      if (Result<void> filled = fill(deadline); !filled) return fail(filled.error());
    }
    detail::clear_stale_openssl_errors();
    std::size_t got = 0;
    const int ok = SSL_read_ex(ssl, buf.data(), buf.size(), &got);
    if (link.renegotiation) {
      ERR_clear_error();
      renegotiations_refused.add();
      broken = detail::tls_error(TlsErrc::protocol, "TLS read",
                                 "the peer asked to renegotiate, which is refused");
      send_alert();
      return fail(broken);
    }
    // What OpenSSL wrote meanwhile (a reply to a key update, the handshake's tail) leaves with
    // the next write, or before the next read waits.
    if (ok == 1) return got;
    const int error = SSL_get_error(ssl, ok);
    if (error == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return 0;  // close_notify: a clean end of stream
    }
    if (on_socket && (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE)) {
      if (Result<void> ready = wait_socket(error, deadline); !ready) return fail(ready.error());
      continue;
    }
    if (on_socket) eof = BIO_eof(SSL_get_rbio(ssl)) == 1;
    if (error == SSL_ERROR_WANT_READ && !eof) {
      if (buffers.output_pending() > 0) {
        if (Result<void> sent = flush(deadline); !sent) return fail(sent.error());
      }
      if (Result<void> filled = fill(deadline); !filled) return fail(filled.error());
      continue;
    }
    const int reason = detail::first_openssl_reason();
    std::string detail = detail::drain_openssl_errors();
    if (eof && (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING || detail.empty())) {
      broken = detail::tls_error(TlsErrc::truncated, "TLS read",
                                 "the peer closed the connection without close_notify");
    } else if (is_certificate_reason(reason)) {
      // A TLS 1.3 server refuses a client's certificate after the client's handshake is done.
      broken = detail::tls_error(TlsErrc::certificate, "TLS read", detail);
    } else {
      broken = detail::tls_error(TlsErrc::protocol, "TLS read",
                                 detail.empty() ? "unknown OpenSSL error" : detail);
    }
    send_alert();
    return fail(broken);
  }
}

Result<void> TlsStream::Impl::write(std::span<const std::byte> buf, Deadline deadline) {
  if (broken) return fail(broken);
  while (!buf.empty()) {
    Result<std::size_t> written = encrypt(buf, deadline, sends_directly);
    if (!written) return fail(written.error());
    buf = buf.subspan(*written);
    if (unsent_output.empty() && buffers.output_pending() == 0) continue;  // all sent already
    if (Result<void> sent = flush(deadline); !sent) return sent;
  }
  return {};
}

Result<std::size_t> TlsStream::Impl::try_write(std::span<const std::byte> buf) {
  if (broken) return fail(broken);
  if (on_socket) return std::size_t{0};  // OpenSSL writes the socket itself: nothing to try
  for (std::span<const std::byte> rest = buf; !rest.empty();) {
    // Never waits on the buffers; a reply of one record leaves as it is sealed.
    Result<std::size_t> written = encrypt(rest, kNoDeadline, /*send_now=*/true);
    if (!written) return fail(written.error());
    rest = rest.subspan(*written);
  }
  if (unsent_output.empty() && buffers.output_pending() == 0) return buf.size();  // all sent
  // A fiber parked in flush() sends these records after its own; so does the next flush
  // when an earlier try_write left ciphertext unsent.
  if (!unsent_output.empty() || !write_mutex.try_lock()) return buf.size();
  std::lock_guard lock(write_mutex, std::adopt_lock);
  const std::span<const std::byte> output = buffers.take_output();
  Result<std::size_t> sent = io::try_send(tcp.fd(), output);
  if (!sent) {
    broken = sent.error();  // the records are lost: the stream cannot go on
    return fail(sent.error());
  }
  unsent_output = output.subspan(*sent);
  return buf.size();
}

TlsStream::TlsStream() noexcept = default;
TlsStream::TlsStream(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
TlsStream::TlsStream(TlsStream&&) noexcept = default;
TlsStream& TlsStream::operator=(TlsStream&&) noexcept = default;
TlsStream::~TlsStream() = default;

Result<void> TlsStream::Impl::set_up(const TlsContext& context) {
  Impl& impl = *this;
  if (!context.is_valid())
    return fail(detail::tls_error(TlsErrc::config, "TLS stream", "no context"));
  impl.state = context.state();
  Result<SSL*> ssl = detail::new_ssl(*impl.state, impl.generation);
  if (!ssl) return fail(ssl.error());
  impl.ssl = *ssl;
  const bool kernel_tls = impl.state->server ? impl.state->server_config.kernel_tls
                                             : impl.state->client_config.kernel_tls;
  // With kernel_tls the handshake runs on a socket BIO, where OpenSSL can hand the keys to
  // the kernel (SSL_OP_ENABLE_KTLS); otherwise on the stream's buffers.
  BIO* bio = kernel_tls ? BIO_new_socket(impl.tcp.fd(), BIO_NOCLOSE) : impl.buffers.make_bio();
  if (bio == nullptr)
    return fail(detail::tls_error(TlsErrc::config, "TLS stream", "no memory for buffers"));
  SSL_set_bio(impl.ssl, bio, bio);  // one BIO both ways: the SSL holds one reference
  if (kernel_tls) {
    SSL_set_options(impl.ssl, SSL_OP_ENABLE_KTLS);
    impl.on_socket = true;
  }

  impl.sends_directly = io::current_backend() == io::Backend::epoll;
  impl.link.state = impl.state.get();
  SSL_set_ex_data(impl.ssl, detail::link_index(), &impl.link);
  return {};
}

Result<TlsStream> TlsStream::connect(net::TcpStream tcp, const TlsContext& context,
                                     std::string_view server_name, Deadline handshake_deadline) {
  auto impl = std::make_unique<Impl>();
  impl->tcp = std::move(tcp);
  if (context.is_server())
    return fail(detail::tls_error(TlsErrc::config, "TLS connect", "a server context"));
  if (Result<void> made = impl->set_up(context); !made) return fail(made.error());
  const std::string name(server_name);
  const ClientConfig& config = impl->state->client_config;
  SSL_set_connect_state(impl->ssl);
  if (!name.empty() && !is_ip_address(name)) SSL_set_tlsext_host_name(impl->ssl, name.c_str());
  if (config.verify_peer) {
    if (name.empty())
      return fail(
          detail::tls_error(TlsErrc::config, "TLS connect", "verifying the server needs its name"));
    const int set = is_ip_address(name)
                        ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(impl->ssl), name.c_str())
                        : SSL_set1_host(impl->ssl, name.c_str());
    if (set != 1)
      return fail(detail::tls_error(TlsErrc::config, "TLS connect to " + name,
                                    detail::drain_openssl_errors()));
  }
  impl->link.session_key = name;
  if (config.session_resumption) {
    if (detail::SessionPtr session = impl->state->session(name))
      SSL_set_session(impl->ssl, session.get());
  }
  if (Result<void> done = impl->handshake(handshake_deadline); !done) return fail(done.error());
  return TlsStream(std::move(impl));
}

Result<TlsStream> TlsStream::connect(std::string_view host_port, const TlsContext& context,
                                     Deadline deadline) {
  std::string_view host = host_port.substr(0, host_port.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  Result<net::TcpStream> tcp = net::TcpStream::connect(host_port, deadline);
  if (!tcp) return fail(tcp.error());
  return connect(std::move(*tcp), context, host, deadline);
}

Result<TlsStream> TlsStream::accept(net::TcpStream tcp, const TlsContext& context,
                                    Deadline handshake_deadline) {
  auto impl = std::make_unique<Impl>();
  impl->tcp = std::move(tcp);
  if (context.is_valid() && !context.is_server())
    return fail(detail::tls_error(TlsErrc::config, "TLS accept", "a client context"));
  if (Result<void> made = impl->set_up(context); !made) return fail(made.error());
  SSL_set_accept_state(impl->ssl);
  if (Result<void> done = impl->handshake(handshake_deadline); !done) return fail(done.error());
  return TlsStream(std::move(impl));
}

Result<std::size_t> TlsStream::read(std::span<std::byte> buf, Deadline deadline) {
  if (!impl_) return fail(make_error_code(TlsErrc::closed));
  return impl_->read(buf, deadline);
}

Result<void> TlsStream::read_exact(std::span<std::byte> buf, Deadline deadline) {
  while (!buf.empty()) {
    Result<std::size_t> n = read(buf, deadline);
    if (!n) return fail(n.error());
    if (*n == 0) return fail(Errc::eof);
    buf = buf.subspan(*n);
  }
  return {};
}

Result<std::size_t> TlsStream::readv(std::span<const iovec> iov, Deadline deadline) {
  if (!impl_) return fail(make_error_code(TlsErrc::closed));
  std::size_t total = 0;
  for (const iovec& piece : iov) {
    if (piece.iov_len == 0) continue;
    std::span<std::byte> buf(static_cast<std::byte*>(piece.iov_base), piece.iov_len);
    if (total > 0) {
      // Only what is decrypted or received already: never wait once some bytes are in.
      if (SSL_pending(impl_->ssl) == 0 && impl_->buffers.input_pending() == 0) break;
      detail::clear_stale_openssl_errors();
      std::size_t got = 0;
      if (SSL_read_ex(impl_->ssl, buf.data(), buf.size(), &got) != 1) {
        ERR_clear_error();  // the next read reports it
        break;
      }
      total += got;
      if (got < buf.size()) break;
      continue;
    }
    Result<std::size_t> n = impl_->read(buf, deadline);
    if (!n) return n;
    if (*n == 0) return 0;
    total = *n;
    if (*n < buf.size()) break;
  }
  return total;
}

Result<std::size_t> TlsStream::write(std::span<const std::byte> buf, Deadline deadline) {
  if (Result<void> done = write_all(buf, deadline); !done) return fail(done.error());
  return buf.size();
}

Result<void> TlsStream::write_all(std::span<const std::byte> buf, Deadline deadline) {
  if (!impl_) return fail(make_error_code(TlsErrc::closed));
  return impl_->write(buf, deadline);
}

Result<std::size_t> TlsStream::writev(std::span<const iovec> iov, Deadline deadline) {
  if (!impl_) return fail(make_error_code(TlsErrc::closed));
  if (impl_->broken) return fail(impl_->broken);
  // Every piece is encrypted into the outgoing buffer, then the lot leaves in one flush
  // (one socket write for a header and a body).
  std::size_t total = 0;
  std::size_t buffered = 0;
  for (const iovec& piece : iov) {
    std::span<const std::byte> buf(static_cast<const std::byte*>(piece.iov_base), piece.iov_len);
    while (!buf.empty()) {
      Result<std::size_t> written = impl_->encrypt(buf, deadline);
      if (!written) return fail(written.error());
      buf = buf.subspan(*written);
      total += *written;
      buffered += *written;
      if (buffered >= kWriteChunk) {
        if (Result<void> sent = impl_->flush(deadline); !sent) return fail(sent.error());
        buffered = 0;
      }
    }
  }
  if (Result<void> sent = impl_->flush(deadline); !sent) return fail(sent.error());
  return total;
}

Result<void> TlsStream::writev_all(std::span<iovec> iov, Deadline deadline) {
  Result<std::size_t> n = writev(iov, deadline);
  if (!n) return fail(n.error());
  return {};
}

Result<std::size_t> TlsStream::try_write(std::span<const std::byte> buf) {
  if (!impl_) return fail(make_error_code(TlsErrc::closed));
  return impl_->try_write(buf);
}

Result<void> TlsStream::flush(Deadline deadline) {
  if (!impl_) return fail(make_error_code(TlsErrc::closed));
  if (impl_->broken) return fail(impl_->broken);
  if (impl_->unsent_output.empty() && impl_->buffers.output_pending() == 0) return {};
  return impl_->flush(deadline);
}

std::size_t TlsStream::unsent() const noexcept {
  return impl_ ? impl_->unsent_output.size() + impl_->buffers.output_pending() : 0;
}

Result<void> TlsStream::shutdown(int how, Deadline deadline) {
  if (!impl_) return fail(make_error_code(TlsErrc::closed));
  if (!impl_->broken) {
    ERR_clear_error();
    (void)SSL_shutdown(impl_->ssl);  // queues close_notify; the peer's is not waited for
    ERR_clear_error();
    if (Result<void> sent = impl_->flush(deadline); !sent) return sent;
  }
  return impl_->tcp.shutdown(how);
}

void TlsStream::close() noexcept {
  if (impl_) impl_->tcp.close();
}

bool TlsStream::is_open() const noexcept { return impl_ && impl_->tcp.is_open(); }

void TlsStream::set_timeout(std::chrono::nanoseconds timeout) noexcept {
  if (impl_) impl_->tcp.set_timeout(timeout);
}

PeerIdentity TlsStream::peer_identity() const {
  PeerIdentity identity;
  if (!impl_) return identity;
  X509* certificate = SSL_get0_peer_certificate(impl_->ssl);
  if (certificate == nullptr) return identity;
  identity.has_certificate = true;
  identity.verified = (SSL_get_verify_mode(impl_->ssl) & SSL_VERIFY_PEER) != 0 &&
                      SSL_get_verify_result(impl_->ssl) == X509_V_OK;
  if (BIO* text = BIO_new(BIO_s_mem())) {
    X509_NAME_print_ex(text, X509_get_subject_name(certificate), 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    const long size = BIO_get_mem_data(text, &data);
    if (size > 0) identity.subject.assign(data, static_cast<std::size_t>(size));
    BIO_free(text);
  }
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_DNS || name->type == GEN_URI || name->type == GEN_EMAIL) {
        const ASN1_STRING* value = name->d.ia5;
        identity.names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                                    static_cast<std::size_t>(ASN1_STRING_length(value)));
      } else if (name->type == GEN_IPADD) {
        const ASN1_OCTET_STRING* value = name->d.iPAddress;
        char text[INET6_ADDRSTRLEN] = {};
        const int length = ASN1_STRING_length(value);
        const int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : 0;
        if (family != 0 &&
            inet_ntop(family, ASN1_STRING_get0_data(value), text, sizeof text) != nullptr)
          identity.names.emplace_back(text);
      }
    }
    GENERAL_NAMES_free(names);
  }
  return identity;
}

std::string TlsStream::alpn() const {
  if (!impl_) return {};
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(impl_->ssl, &data, &length);
  return data == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(data), length);
}

bool TlsStream::resumed() const noexcept { return impl_ && SSL_session_reused(impl_->ssl) == 1; }

bool TlsStream::kernel_tls() const noexcept { return impl_ && impl_->kernel; }

std::string TlsStream::version() const { return impl_ ? SSL_get_version(impl_->ssl) : ""; }

std::string TlsStream::server_name() const {
  if (!impl_) return {};
  const char* name = SSL_get_servername(impl_->ssl, TLSEXT_NAMETYPE_host_name);
  return name == nullptr ? std::string() : std::string(name);
}

std::error_code TlsStream::failure() const noexcept {
  return impl_ ? impl_->broken : std::error_code();
}

net::TcpStream& TlsStream::tcp() noexcept {
  TERN_ASSERT(impl_ != nullptr, "TlsStream::tcp() on an empty stream");
  return impl_->tcp;
}

}  // namespace tern::tls
