#include "openssl_error.h"

#include <openssl/err.h>

#include "tern/base/result.h"

namespace tern::tls {

namespace {

class TlsCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern.tls"; }
  std::string message(int value) const override {
    switch (static_cast<TlsErrc>(value)) {
      case TlsErrc::config:
        return "TLS configuration error";
      case TlsErrc::handshake:
        return "TLS handshake failed";
      case TlsErrc::certificate:
        return "TLS certificate rejected";
      case TlsErrc::truncated:
        return "TLS stream truncated (closed without close_notify)";
      case TlsErrc::protocol:
        return "TLS protocol error";
      case TlsErrc::closed:
        return "TLS stream closed";
    }
    return "unknown TLS error";
  }
};

}  // namespace

const std::error_category& tls_category() noexcept {
  static const TlsCategory category;
  return category;
}

namespace detail {

std::string drain_openssl_errors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof buffer);
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text;
}

void clear_stale_openssl_errors() noexcept {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

int first_openssl_reason() noexcept { return ERR_GET_REASON(ERR_peek_error()); }

std::error_code tls_error(TlsErrc code, const std::string& what, const std::string& detail) {
  std::string text = what;
  if (!detail.empty()) text += ": " + detail;
  return with_explanation(make_error_code(code), text);
}

}  // namespace detail
}  // namespace tern::tls
