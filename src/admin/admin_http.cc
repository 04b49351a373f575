#include "admin_http.h"

#include <algorithm>
#include <array>

namespace tern::admin::detail {

namespace {

// RFC 9110 token characters.
constexpr std::array<bool, 256> kTokenChars = [] {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) table[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

bool is_token_char(char c) noexcept { return kTokenChars[static_cast<unsigned char>(c)]; }
bool is_visible(char c) noexcept { return c > 0x20 && c < 0x7f; }
// Control bytes other than HT, CR and LF never appear in a request head.
bool is_forbidden(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t' && c != '\r' && c != '\n') || u == 0x7f;
}

// Whether `line` (without its line end) could be the start of a request line; when `whole`,
// whether it is one (then fills `head`).
bool check_request_line(std::string_view line, bool whole, RequestHead* head) noexcept {
  std::size_t i = 0;
  while (i < line.size() && is_token_char(line[i])) ++i;
  if (i == line.size()) return !whole;
  if (i == 0 || line[i] != ' ') return false;
  const std::string_view method = line.substr(0, i);
  const std::size_t target_start = ++i;
  while (i < line.size() && is_visible(line[i])) ++i;
  if (i == target_start && i < line.size()) return false;
  if (target_start < line.size() && line[target_start] != '/' && line[target_start] != '*')
    return false;
  if (i == line.size()) return !whole;
  if (line[i] != ' ') return false;
  const std::string_view target = line.substr(target_start, i - target_start);
  const std::string_view version = line.substr(i + 1);
  constexpr std::string_view kPrefix = "HTTP/1.";
  const std::size_t compared = std::min(version.size(), kPrefix.size());
  if (version.substr(0, compared) != kPrefix.substr(0, compared)) return false;
  if (!whole) {
    if (version.size() <= kPrefix.size()) return true;
    return version.size() == kPrefix.size() + 1 && (version.back() == '0' || version.back() == '1');
  }
  if (version.size() != kPrefix.size() + 1 || (version.back() != '0' && version.back() != '1'))
    return false;
  head->method = method;
  head->target = target;
  head->path = target.substr(0, target.find('?'));
  head->minor_version = version.back() - '0';
  return true;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim_blanks(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Whether `line` (without its line end) is, or when !whole could become, a header line; when
// whole, an Authorization header's value goes into `head`.
bool check_header_line(std::string_view line, bool whole, RequestHead* head) noexcept {
  std::size_t i = 0;
  while (i < line.size() && is_token_char(line[i])) ++i;
  if (i == line.size()) return !whole;  // the name so far (a leading space is obs-fold: no)
  if (i == 0 || line[i] != ':') return false;
  if (whole && equals_ignoring_case(line.substr(0, i), "authorization"))
    head->authorization = trim_blanks(line.substr(i + 1));
  return true;
}

}  // namespace

HeadParse parse_request_head(std::string_view data, std::size_t max_head_bytes) noexcept {
  HeadParse result;
  std::size_t line_start = 0;
  bool first = true;
  for (;;) {
    const std::size_t newline = data.find('\n', line_start);
    const bool whole = newline != std::string_view::npos;
    std::string_view line =
        data.substr(line_start, whole ? newline - line_start : std::string_view::npos);
    if (line.ends_with('\r')) line.remove_suffix(1);  // a CR whose LF may not be here yet
    for (char c : line) {
      if (is_forbidden(c) || c == '\r') {
        result.state = HeadState::malformed;
        return result;
      }
    }
    if (whole && line.empty() && !first) {
      result.state = newline + 1 > max_head_bytes ? HeadState::too_large : HeadState::complete;
      return result;
    }
    const bool valid = first ? check_request_line(line, whole, &result.request)
                             : check_header_line(line, whole, &result.request);
    if (!valid) {
      result.state = HeadState::malformed;
      return result;
    }
    if (!whole) break;
    first = false;
    line_start = newline + 1;
  }
  result.state = data.size() > max_head_bytes ? HeadState::too_large : HeadState::incomplete;
  return result;
}

bool bearer_token_matches(std::string_view authorization, std::string_view token) noexcept {
  constexpr std::string_view kScheme = "bearer";
  if (token.empty() || authorization.size() <= kScheme.size() ||
      !equals_ignoring_case(authorization.substr(0, kScheme.size()), kScheme) ||
      (authorization[kScheme.size()] != ' ' && authorization[kScheme.size()] != '\t'))
    return false;
  const std::string_view presented = trim_blanks(authorization.substr(kScheme.size()));
  // Every byte presented is compared (against the token's bytes, cycled), whatever matched
  // before: the time says how long the presented token was, which its sender knows anyway.
  unsigned difference = presented.size() == token.size() ? 0u : 1u;
  for (std::size_t i = 0; i < presented.size(); ++i)
    difference |= static_cast<unsigned char>(presented[i]) ^
                  static_cast<unsigned char>(token[i % token.size()]);
  return difference == 0 && !presented.empty();
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

std::string http_response(int status, std::string_view content_type, std::string_view body,
                          bool head_only, std::string_view extra_headers) {
  std::string out;
  out.reserve(160 + extra_headers.size() + (head_only ? 0 : body.size()));
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason_phrase(status);
  out += "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += "\r\nConnection: close\r\nCache-Control: no-store\r\n";
  out += extra_headers;
  out += "\r\n";
  if (!head_only) out += body;
  return out;
}

}  // namespace tern::admin::detail
