// The small HTTP/1.x subset the admin endpoint speaks: parsing a request head as it arrives,
// and writing a complete response.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tern::admin::detail {

// How far a request head has got.
enum class HeadState {
  incomplete,  // valid so far, the blank line has not arrived
  complete,    // the request line and every header line parsed
  malformed,   // not HTTP/1.x: answer 400 and close
  too_large,   // the head exceeds the limit: answer 431 and close
};

// A parsed request line; the views point into the text given to parse_request_head.
struct RequestHead {
  std::string_view method;
  std::string_view target;  // as sent, query included
  std::string_view path;    // target without the query
  int minor_version = 1;    // HTTP/1.minor
  // The value of the Authorization header without surrounding blanks (empty: none; the last
  // one if the request repeats it).
  std::string_view authorization;
};

struct HeadParse {
  HeadState state = HeadState::incomplete;
  RequestHead request;
};

// Parses `data`, everything received so far on a connection. Rejects at once what can never
// become a valid head (control bytes, a bad request line or header line), so garbage is
// answered before the read deadline. Lines may end in CRLF or LF. Any thread.
HeadParse parse_request_head(std::string_view data, std::size_t max_head_bytes) noexcept;

// Whether `authorization` (an Authorization header's value) is "Bearer <token>" with exactly
// `token` (not empty). The time taken depends on the lengths only, never on where the two
// differ. Any thread.
bool bearer_token_matches(std::string_view authorization, std::string_view token) noexcept;

// The standard reason phrase of an HTTP status code. Any thread.
std::string_view reason_phrase(int status) noexcept;

// A complete HTTP/1.1 response with Content-Length and "Connection: close"; `extra_headers` are
// whole "Name: value\r\n" lines. With head_only the body is left out (a HEAD request). Any thread.
std::string http_response(int status, std::string_view content_type, std::string_view body,
                          bool head_only = false, std::string_view extra_headers = {});

}  // namespace tern::admin::detail
