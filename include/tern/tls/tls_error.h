#pragma once

#include <system_error>

namespace tern::tls {

// What went wrong in a TLS connection or context, beyond the socket errors that pass through
// unchanged (deadlines, cancellation, resets). Errors carry OpenSSL's reason text in message().
enum class TlsErrc {
  config = 1,   // a certificate, key or CA bundle could not be loaded or does not match
  handshake,    // the handshake failed (not TLS, no shared version or cipher, bad record)
  certificate,  // a certificate was rejected (expired, unknown CA, wrong host, missing)
  truncated,    // the peer closed the connection without close_notify
  protocol,     // a TLS error after the handshake (bad record MAC, oversized record)
  closed,       // the stream is closed or broken by an earlier error
};

// The error category of TlsErrc. Any thread.
const std::error_category& tls_category() noexcept;

// TlsErrc is an error condition: `error == TlsErrc::certificate` holds for tern's TLS errors of
// that kind whatever text they carry. Any thread.
inline std::error_condition make_error_condition(TlsErrc e) noexcept {
  return {static_cast<int>(e), tls_category()};
}

// An error_code of a TlsErrc with no text of its own. Any thread.
inline std::error_code make_error_code(TlsErrc e) noexcept {
  return {static_cast<int>(e), tls_category()};
}

}  // namespace tern::tls

template <>
struct std::is_error_condition_enum<tern::tls::TlsErrc> : std::true_type {};
