#pragma once

#include <string>
#include <system_error>

#include "tern/tls/tls_error.h"

namespace tern::tls::detail {

// Takes every error OpenSSL queued on the calling thread (oldest first) and joins their reason
// texts with "; ", leaving the queue empty; "" when there was none. Any thread.
std::string drain_openssl_errors();

// The reason code of the oldest queued error (0 if none), without removing it. Any thread.
int first_openssl_reason() noexcept;

// Empties the calling thread's OpenSSL error queue before an SSL call whose result is read with
// SSL_get_error, looking first: clearing an empty queue walks all its slots, 6 % of a TLS RPC
// server's instructions when done before every SSL_read and SSL_write. Any thread.
void clear_stale_openssl_errors() noexcept;

// An error of `code` whose message reads "<what>: <detail>". Any thread.
std::error_code tls_error(TlsErrc code, const std::string& what, const std::string& detail);

}  // namespace tern::tls::detail
