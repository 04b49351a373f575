// Writes the seed corpus of admin_http_fuzz (tests/fuzz/corpus/admin_http) into the directory
// given. Each seed is two control bytes (head limit / 16 - 1, read sizes; see admin_http_parse.h)
// and the text of a request head; its name says the parser's answer for the whole text.
// The checked-in seeds were made with: admin_http_seeds tests/fuzz/corpus/admin_http
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "seed_files.h"

namespace {

// The control bytes: a head limit of 16 * (limit + 1) bytes, reads of 1 to `max_read` bytes
// (0: the whole text at once).
std::string control(std::uint8_t limit, std::uint8_t max_read) {
  return std::string{static_cast<char>(limit), static_cast<char>(max_read)};
}

const std::string kLargest = control(255, 0);  // 4096 bytes, one read

}  // namespace

int main(int argc, char** argv) {
  using namespace std::string_literals;
  const std::string curl =
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nUser-Agent: curl/8.5.0\r\n"
      "Accept: */*\r\n\r\n";
  const std::vector<tern::fuzz::Seed> seeds = {
      {"complete-curl", kLargest + curl},
      {"complete-curl-bytewise", control(255, 1) + curl},
      {"complete-curl-reads-9", control(255, 9) + curl},
      {"complete-status-http10", kLargest + "GET /status HTTP/1.0\r\n\r\n"},
      {"complete-head-lf-only", control(255, 4) + "HEAD / HTTP/1.1\nHost: x\n\n"},
      {"complete-query", kLargest + "GET /metrics?name=tern_calls&x= HTTP/1.1\r\n\r\n"},
      {"complete-options-star", kLargest + "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"},
      {"complete-post-with-body", kLargest + "POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"},
      {"complete-empty-value", kLargest + "GET / HTTP/1.1\r\nX-Empty:\r\nX: \ttab\r\n\r\n"},
      {"complete-at-limit", control(1, 3) + "GET /abcdefghi HTTP/1.1\r\nA:b\r\n\r\n"},
      {"incomplete-empty", kLargest},
      {"incomplete-method", control(255, 1) + "GE"},
      {"incomplete-request-line", kLargest + "GET /metrics HTTP/1."},
      {"incomplete-cr", kLargest + "GET / HTTP/1.1\r"},
      {"incomplete-headers", control(255, 5) + "GET / HTTP/1.1\r\nHost: a\r\nAcc"},
      {"malformed-leading-blank", kLargest + "\r\nGET / HTTP/1.1\r\n\r\n"},
      {"malformed-http2", kLargest + "GET / HTTP/2.0\r\n\r\n"},
      {"malformed-http12", kLargest + "GET / HTTP/1.2\r\n\r\n"},
      {"malformed-relative-target", kLargest + "GET metrics HTTP/1.1\r\n\r\n"},
      {"malformed-two-spaces", kLargest + "GET  / HTTP/1.1\r\n\r\n"},
      {"malformed-nul", control(255, 2) + "GET /\0 HTTP/1.1\r\n\r\n"s},
      {"malformed-bare-cr", kLargest + "GET / HTTP/1.1\rHost: a\r\n\r\n"},
      {"malformed-obs-fold", kLargest + "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"},
      {"malformed-header-no-colon", kLargest + "GET / HTTP/1.1\r\nHost a\r\n\r\n"},
      {"malformed-tls-hello", control(255, 7) + "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"s},
      {"too_large-line", control(1, 8) + "GET /" + std::string(40, 'a') + " HTTP/1.1\r\n"},
      {"too_large-headers", control(3, 0) + "GET / HTTP/1.1\r\n" + std::string(60, 'h') + ": v"},
      {"too_large-complete", control(1, 0) + "GET /abcdefghi HTTP/1.1\r\nA:bc\r\n\r\n"},
  };
  return tern::fuzz::write_seed_files(argc, argv, seeds);
}
