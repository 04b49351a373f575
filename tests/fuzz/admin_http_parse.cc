#include "admin_http_parse.h"

#include <cstdint>
#include <string_view>

#include "chunk_splitter.h"
#include "require.h"

namespace tern::fuzz {

namespace {

using admin::detail::HeadParse;
using admin::detail::HeadState;

void require(bool condition, const char* what) {
  fuzz::require(condition, "admin request head parser", what);
}

bool inside(std::string_view part, std::string_view text) {
  return part.data() >= text.data() && part.data() + part.size() <= text.data() + text.size();
}

bool same_view(std::string_view a, std::string_view b) {
  return a.data() == b.data() && a.size() == b.size();
}

// Where the head of `text` ends: just past the first empty line after the request line (CRLF or
// LF), or npos when there is none yet.
std::size_t head_end(std::string_view text) {
  std::size_t line_start = text.find('\n');
  if (line_start == std::string_view::npos) return std::string_view::npos;
  for (++line_start;;) {
    const std::size_t newline = text.find('\n', line_start);
    if (newline == std::string_view::npos) return std::string_view::npos;
    if (newline == line_start || (newline == line_start + 1 && text[line_start] == '\r'))
      return newline + 1;
    line_start = newline + 1;
  }
}

// Checks the answer for one prefix on its own.
void check_answer(const HeadParse& parsed, std::string_view prefix, std::size_t limit) {
  if (parsed.state == HeadState::incomplete) {
    require(prefix.size() <= limit, "an incomplete head over the limit");
    require(head_end(prefix) == std::string_view::npos, "a head with its blank line is incomplete");
  }
  if (parsed.state != HeadState::complete) return;
  const std::size_t end = head_end(prefix);
  require(end != std::string_view::npos, "a complete head without a blank line");
  require(end <= limit, "a complete head over the limit");
  const admin::detail::RequestHead& request = parsed.request;
  const std::string_view head = prefix.substr(0, end);
  require(
      inside(request.method, head) && inside(request.target, head) && inside(request.path, head),
      "a view points outside the head");
  require(request.method.data() == head.data() && !request.method.empty(),
          "the method does not start the head");
  require(request.target.data() == request.method.data() + request.method.size() + 1,
          "the target does not follow the method and one space");
  require(!request.target.empty() && (request.target[0] == '/' || request.target[0] == '*') &&
              request.target.find(' ') == std::string_view::npos,
          "a target that is not a path or * without spaces");
  require(request.path.data() == request.target.data() &&
              request.path.size() <= request.target.size() &&
              request.path.find('?') == std::string_view::npos &&
              (request.path.size() == request.target.size() ||
               request.target[request.path.size()] == '?'),
          "the path is not the target up to its query");
  require(request.minor_version == 0 || request.minor_version == 1, "not HTTP/1.0 or 1.1");
  const std::string_view version =
      head.substr(request.target.data() + request.target.size() - head.data());
  require(version.starts_with(request.minor_version == 0 ? " HTTP/1.0\n" : " HTTP/1.1\n") ||
              version.starts_with(request.minor_version == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n"),
          "the request line does not end in its version");
}

// Checks the answer for a prefix against the first final answer for a shorter one.
void check_after(const HeadParse& parsed, const HeadParse& earlier) {
  switch (earlier.state) {
    case HeadState::complete:
      require(parsed.state == HeadState::complete &&
                  same_view(parsed.request.method, earlier.request.method) &&
                  same_view(parsed.request.target, earlier.request.target) &&
                  same_view(parsed.request.path, earlier.request.path) &&
                  parsed.request.minor_version == earlier.request.minor_version,
              "a complete head changed when more bytes arrived");
      return;
    case HeadState::malformed:
      require(parsed.state == HeadState::malformed,
              "a malformed head became valid when more bytes arrived");
      return;
    case HeadState::too_large:
      require(parsed.state == HeadState::too_large || parsed.state == HeadState::malformed,
              "a head over the limit was accepted when more bytes arrived");
      return;
    case HeadState::incomplete:
      return;
  }
}

}  // namespace

HeadArrivals parse_head_arrivals(std::span<const std::byte> input) {
  if (input.size() < 2) return {};
  const std::size_t limit = 16 * (static_cast<std::size_t>(input[0]) + 1);
  ChunkSplitter reads(static_cast<std::uint8_t>(input[1]));
  const std::string_view text(reinterpret_cast<const char*>(input.data()) + 2, input.size() - 2);

  HeadArrivals arrivals;
  HeadParse first_final;  // the first answer that was not incomplete
  std::size_t received = 0;
  do {
    received += reads.next(text.size() - received);
    const std::string_view prefix = text.substr(0, received);
    const HeadParse parsed = admin::detail::parse_request_head(prefix, limit);
    ++arrivals.parses;
    check_answer(parsed, prefix, limit);
    check_after(parsed, first_final);
    if (first_final.state == HeadState::incomplete) first_final = parsed;
    arrivals.state = parsed.state;
  } while (received < text.size());
  return arrivals;
}

}  // namespace tern::fuzz
