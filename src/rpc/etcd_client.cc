#include "etcd_client.h"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "tern/fiber/fiber.h"

namespace tern::rpc::detail {

namespace {

using Json = nlohmann::json;

constexpr std::size_t kMaxHead = 64u << 10;     // status line and headers
constexpr std::size_t kMaxBody = 16u << 20;     // a unary answer
constexpr std::size_t kMaxMessage = 16u << 20;  // one watch message

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// An int64 field of a gateway answer: proto3 JSON writes 64-bit integers as strings, and leaves
// out fields that are zero.
std::int64_t int_field(const Json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const std::string& text = it->get_ref<const std::string&>();
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

Status bad_answer(const std::string& endpoint, std::string_view what) {
  return Status(StatusCode::internal, fmt::format("etcd {}: malformed answer: {}", endpoint, what));
}

// A gateway answer's error ({"error": ..., "message": ..., "code": N}) as a Status; the code is
// gRPC's, which rpc::StatusCode shares.
Status etcd_error(const std::string& endpoint, const Json& answer) {
  std::int64_t code = int_field(answer, "code");
  if (code <= 0 || code > 16) code = static_cast<std::int64_t>(StatusCode::unknown);
  std::string message;
  if (auto it = answer.find("message"); it != answer.end() && it->is_string()) {
    message = it->get<std::string>();
  } else if (auto e = answer.find("error"); e != answer.end() && e->is_string()) {
    message = e->get<std::string>();
  }
  return Status(static_cast<StatusCode>(code), fmt::format("etcd {}: {}", endpoint, message));
}

Result<EtcdKeyValue> key_value(const std::string& endpoint, const Json& kv) {
  if (!kv.is_object()) return std::unexpected(bad_answer(endpoint, "a key-value is not an object"));
  EtcdKeyValue out;
  auto key = kv.find("key");
  if (key == kv.end() || !key->is_string() ||
      !base64_decode(key->get_ref<const std::string&>(), out.key)) {
    return std::unexpected(bad_answer(endpoint, "a key is missing or not base64"));
  }
  if (auto value = kv.find("value"); value != kv.end()) {
    if (!value->is_string() || !base64_decode(value->get_ref<const std::string&>(), out.value))
      return std::unexpected(bad_answer(endpoint, "a value is not base64"));
  }
  out.mod_revision = int_field(kv, "mod_revision");
  out.lease = int_field(kv, "lease");
  return out;
}

// The head of an HTTP response: its status and how its body is delimited.
struct Head {
  int status = 0;
  bool chunked = false;
  std::optional<std::size_t> length;
};

// Reads and parses the status line and headers; what follows them stays in `buffer`.
Result<Head> read_head(net::TcpStream& stream, std::string& buffer, Deadline deadline,
                       const std::string& endpoint) {
  std::size_t end;
  while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > kMaxHead)
      return std::unexpected(bad_answer(endpoint, "HTTP header over 64 KiB"));
    char chunk[4096];
    tern::Result<std::size_t> n = stream.read(std::as_writable_bytes(std::span(chunk)), deadline);
    if (!n)
      return std::unexpected(
          Status::from_error(StatusCode::unavailable, "etcd " + endpoint, n.error()));
    if (*n == 0)
      return std::unexpected(Status(
          StatusCode::unavailable, fmt::format("etcd {}: closed before an HTTP answer", endpoint)));
    buffer.append(chunk, *n);
  }
  std::string_view head(buffer.data(), end);
  Head out;
  std::size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12)
    return std::unexpected(bad_answer(endpoint, fmt::format("status line '{}'", status_line)));
  std::string_view code = status_line.substr(9, 3);
  if (std::from_chars(code.data(), code.data() + code.size(), out.status).ptr !=
      code.data() + code.size())
    return std::unexpected(bad_answer(endpoint, fmt::format("status line '{}'", status_line)));
  while (line_end != std::string_view::npos) {
    head.remove_prefix(line_end + 2);
    line_end = head.find("\r\n");
    std::string_view line = head.substr(0, line_end);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = trim(line.substr(0, colon));
    std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "transfer-encoding") && iequals(value, "chunked")) {
      out.chunked = true;
    } else if (iequals(name, "content-length")) {
      std::size_t length = 0;
      if (std::from_chars(value.data(), value.data() + value.size(), length).ptr !=
          value.data() + value.size())
        return std::unexpected(bad_answer(endpoint, "bad Content-Length"));
      out.length = length;
    }
  }
  buffer.erase(0, end + 4);
  return out;
}

// Moves the data of complete chunks from `raw` to `out`; `left` is what remains of the current
// chunk plus its CRLF (0: a size line comes next). Sets `ended` at the last chunk.
Result<void> dechunk(std::string& raw, std::string& out, std::uint64_t& left, bool& ended,
                     const std::string& endpoint) {
  std::size_t at = 0;
  while (!ended && at < raw.size()) {
    if (left == 0) {
      const std::size_t eol = raw.find("\r\n", at);
      if (eol == std::string::npos) {
        if (raw.size() - at > 1024) return std::unexpected(bad_answer(endpoint, "chunk size line"));
        break;
      }
      std::string_view line(raw.data() + at, eol - at);
      if (std::size_t semi = line.find(';'); semi != std::string_view::npos)
        line = line.substr(0, semi);
      line = trim(line);
      std::uint64_t size = 0;
      auto parsed = std::from_chars(line.data(), line.data() + line.size(), size, 16);
      if (line.empty() || parsed.ptr != line.data() + line.size() || size > kMaxMessage)
        return std::unexpected(bad_answer(endpoint, fmt::format("chunk size '{}'", line)));
      at = eol + 2;
      if (size == 0) {
        ended = true;
        break;
      }
      left = size + 2;
      continue;
    }
    const std::uint64_t available = raw.size() - at;
    if (left > 2) {
      const std::size_t take =
          static_cast<std::size_t>(std::min<std::uint64_t>(left - 2, available));
      out.append(raw, at, take);
      at += take;
      left -= take;
      continue;
    }
    // The CRLF after the chunk's data.
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(left, available));
    at += take;
    left -= take;
  }
  raw.erase(0, at);
  return {};
}

// Reads the whole body of a response whose head is `head`.
Result<std::string> read_body(net::TcpStream& stream, std::string& buffer, const Head& head,
                              Deadline deadline, const std::string& endpoint) {
  std::string body;
  std::uint64_t left = 0;
  bool ended = false;
  for (;;) {
    if (head.chunked) {
      if (Result<void> r = dechunk(buffer, body, left, ended, endpoint); !r)
        return std::unexpected(r.error());
      if (ended) return body;
    } else {
      body += buffer;
      buffer.clear();
      if (head.length && body.size() >= *head.length) {
        body.resize(*head.length);
        return body;
      }
    }
    if (body.size() > kMaxBody) return std::unexpected(bad_answer(endpoint, "answer over 16 MiB"));
    char chunk[16384];
    tern::Result<std::size_t> n = stream.read(std::as_writable_bytes(std::span(chunk)), deadline);
    if (!n)
      return std::unexpected(
          Status::from_error(StatusCode::unavailable, "etcd " + endpoint, n.error()));
    if (*n == 0) {
      if (!head.chunked && !head.length) return body;  // delimited by the close
      return std::unexpected(
          Status(StatusCode::unavailable,
                 fmt::format("etcd {}: closed in the middle of an answer", endpoint)));
    }
    buffer.append(chunk, *n);
  }
}

std::string http_request(std::string_view path, const std::string& endpoint,
                         const std::string& body, bool keep_open) {
  return fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: "
      "{}\r\n{}\r\n{}",
      path, endpoint, body.size(), keep_open ? "" : "Connection: close\r\n", body);
}

Result<net::TcpStream> open_request(const std::string& endpoint, std::string_view path,
                                    const std::string& body, bool keep_open, Deadline deadline) {
  tern::Result<net::TcpStream> stream = net::TcpStream::connect(endpoint, deadline);
  if (!stream)
    return std::unexpected(
        Status::from_error(StatusCode::unavailable, "etcd " + endpoint, stream.error()));
  const std::string request = http_request(path, endpoint, body, keep_open);
  if (tern::Result<void> w = stream->write_all(std::as_bytes(std::span(request)), deadline); !w)
    return std::unexpected(
        Status::from_error(StatusCode::unavailable, "etcd " + endpoint, w.error()));
  return std::move(*stream);
}

// The JSON document of an answer, or a Status: etcd's error, or a malformed answer.
Result<Json> parse_answer(const std::string& endpoint, int http_status, std::string_view text) {
  Json answer = Json::parse(text, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) {
    std::string_view shown = text.substr(0, 120);
    return std::unexpected(bad_answer(
        endpoint,
        fmt::format("HTTP {} with a body that is not a JSON object: '{}'", http_status, shown)));
  }
  if (answer.contains("error") || http_status != 200)
    return std::unexpected(etcd_error(endpoint, answer));
  return answer;
}

}  // namespace

Result<std::vector<std::string>> parse_etcd_endpoints(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view entry = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (entry.starts_with("http://")) entry.remove_prefix(7);
    if (entry.empty()) continue;
    const std::size_t colon = entry.rfind(':');
    if (colon == std::string_view::npos || colon + 1 == entry.size()) {
      return std::unexpected(Status(StatusCode::invalid_argument,
                                    fmt::format("etcd endpoint '{}' has no port", entry)));
    }
    out.emplace_back(entry);
  }
  if (out.empty())
    return std::unexpected(Status(StatusCode::invalid_argument, "no etcd endpoint given"));
  return out;
}

std::string etcd_prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (static_cast<std::uint8_t>(bytes[i]) << 16) |
                            (static_cast<std::uint8_t>(bytes[i + 1]) << 8) |
                            static_cast<std::uint8_t>(bytes[i + 2]);
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += kDigits[(v >> 6) & 63];
    out += kDigits[v & 63];
  }
  if (i < bytes.size()) {
    std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool base64_decode(std::string_view text, std::string& out) {
  out.clear();
  if (text.size() % 4 != 0) return false;
  std::uint32_t v = 0;
  int bits = 0;
  std::size_t padding = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    int d;
    if (c >= 'A' && c <= 'Z')
      d = c - 'A';
    else if (c >= 'a' && c <= 'z')
      d = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      d = c - '0' + 52;
    else if (c == '+')
      d = 62;
    else if (c == '/')
      d = 63;
    else if (c == '=' && i + 2 >= text.size()) {
      ++padding;
      d = 0;
    } else {
      return false;
    }
    if (padding > 0 && c != '=') return false;
    v = (v << 6) | static_cast<std::uint32_t>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  out.resize(out.size() - padding);
  return true;
}

EtcdWatch::EtcdWatch(net::TcpStream stream, std::string buffered, std::string endpoint)
    : stream_(std::move(stream)), raw_(std::move(buffered)), endpoint_(std::move(endpoint)) {}

Result<std::string> EtcdWatch::next_line(Deadline deadline) {
  for (;;) {
    if (const std::size_t eol = body_.find('\n'); eol != std::string::npos) {
      std::string line = body_.substr(0, eol);
      body_.erase(0, eol + 1);
      if (trim(line).empty()) continue;
      return line;
    }
    if (body_.size() > kMaxMessage)
      return std::unexpected(bad_answer(endpoint_, "watch message over 16 MiB"));
    if (ended_) {
      return std::unexpected(Status(StatusCode::unavailable,
                                    fmt::format("etcd {}: the watch stream ended", endpoint_)));
    }
    if (Result<void> r = dechunk(raw_, body_, chunk_left_, ended_, endpoint_); !r)
      return std::unexpected(r.error());
    if (body_.find('\n') != std::string::npos || ended_) continue;
    char chunk[16384];
    tern::Result<std::size_t> n = stream_.read(std::as_writable_bytes(std::span(chunk)), deadline);
    if (!n) {
      const StatusCode code = n.error() == std::errc::timed_out ? StatusCode::deadline_exceeded
                                                                : StatusCode::unavailable;
      return std::unexpected(Status::from_error(code, "etcd watch " + endpoint_, n.error()));
    }
    if (*n == 0) {
      return std::unexpected(Status(StatusCode::unavailable,
                                    fmt::format("etcd {}: the watch stream closed", endpoint_)));
    }
    raw_.append(chunk, *n);
  }
}

Result<std::vector<EtcdEvent>> EtcdWatch::next(Deadline deadline, std::int64_t& revision) {
  Result<std::string> line = next_line(deadline);
  if (!line) return std::unexpected(line.error());
  Result<Json> answer = parse_answer(endpoint_, 200, *line);
  if (!answer) return std::unexpected(answer.error());
  auto result = answer->find("result");
  if (result == answer->end() || !result->is_object())
    return std::unexpected(bad_answer(endpoint_, "a watch message without a result"));
  if (auto header = result->find("header"); header != result->end() && header->is_object()) {
    if (const std::int64_t r = int_field(*header, "revision"); r > 0) revision = r;
  }
  if (result->value("canceled", false)) {
    if (const std::int64_t compacted = int_field(*result, "compact_revision"); compacted > 0) {
      return std::unexpected(
          Status(StatusCode::out_of_range,
                 fmt::format("etcd {}: the watch start revision was compacted (now {})", endpoint_,
                             compacted)));
    }
    std::string reason = result->value("cancel_reason", std::string("no reason given"));
    return std::unexpected(Status(StatusCode::unavailable,
                                  fmt::format("etcd {}: watch cancelled: {}", endpoint_, reason)));
  }
  std::vector<EtcdEvent> events;
  if (auto list = result->find("events"); list != result->end()) {
    if (!list->is_array()) return std::unexpected(bad_answer(endpoint_, "events is not a list"));
    for (const Json& event : *list) {
      if (!event.is_object())
        return std::unexpected(bad_answer(endpoint_, "an event is not an object"));
      EtcdEvent out;
      out.deleted = event.value("type", std::string()) == "DELETE";
      auto kv = event.find("kv");
      if (kv == event.end()) return std::unexpected(bad_answer(endpoint_, "an event without kv"));
      Result<EtcdKeyValue> parsed = key_value(endpoint_, *kv);
      if (!parsed) return std::unexpected(parsed.error());
      out.kv = std::move(*parsed);
      events.push_back(std::move(out));
    }
  }
  return events;
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {}

Result<std::string> EtcdClient::post(std::string_view path, const std::string& body,
                                     Deadline deadline) {
  Status last(StatusCode::unavailable, "no etcd endpoint");
  const std::size_t n = endpoints_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t index = (next_ + i) % n;
    const std::string& endpoint = endpoints_[index];
    if (stop_ != nullptr && *stop_)
      return std::unexpected(Status(StatusCode::cancelled, "stopped"));
    // Each endpoint gets a share of what is left, so one that hangs leaves time for the others.
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    const Deadline attempt = i + 1 == n ? deadline : Clock::now() + left / static_cast<int>(n - i);
    Result<net::TcpStream> stream = open_request(endpoint, path, body, false, attempt);
    if (!stream) {
      last = stream.error();
      continue;
    }
    std::string buffer;
    Result<Head> head = read_head(*stream, buffer, attempt, endpoint);
    Result<std::string> text = head ? read_body(*stream, buffer, *head, attempt, endpoint)
                                    : Result<std::string>(std::unexpected(head.error()));
    if (!text) {
      last = text.error();
      if (last.code() == StatusCode::internal) return std::unexpected(last);  // it answered
      continue;
    }
    next_ = index;
    current_ = endpoint;
    Result<Json> answer = parse_answer(endpoint, head->status, *text);
    if (!answer) return std::unexpected(answer.error());
    return std::move(*text);
  }
  if (Clock::now() >= deadline && last.code() == StatusCode::unavailable &&
      last.message().find("timed out") != std::string::npos) {
    return std::unexpected(Status(StatusCode::deadline_exceeded, last.message()));
  }
  return std::unexpected(last);
}

Result<EtcdRange> EtcdClient::range_prefix(std::string_view prefix) {
  const Json request = {{"key", base64_encode(prefix)},
                        {"range_end", base64_encode(etcd_prefix_end(prefix))}};
  Result<std::string> text = post("/v3/kv/range", request.dump(), deadline_after(timeout_));
  if (!text) return std::unexpected(text.error());
  const Json answer = Json::parse(*text, nullptr, false);
  EtcdRange out;
  if (auto header = answer.find("header"); header != answer.end() && header->is_object())
    out.revision = int_field(*header, "revision");
  if (out.revision <= 0) return std::unexpected(bad_answer(current_, "a range without a revision"));
  if (auto kvs = answer.find("kvs"); kvs != answer.end()) {
    if (!kvs->is_array()) return std::unexpected(bad_answer(current_, "kvs is not a list"));
    for (const Json& kv : *kvs) {
      Result<EtcdKeyValue> parsed = key_value(current_, kv);
      if (!parsed) return std::unexpected(parsed.error());
      out.kvs.push_back(std::move(*parsed));
    }
  }
  return out;
}

Result<void> EtcdClient::put(std::string_view key, std::string_view value, std::int64_t lease) {
  Json request = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) request["lease"] = std::to_string(lease);
  Result<std::string> text = post("/v3/kv/put", request.dump(), deadline_after(timeout_));
  if (!text) return std::unexpected(text.error());
  return {};
}

Result<void> EtcdClient::remove(std::string_view key) {
  const Json request = {{"key", base64_encode(key)}};
  Result<std::string> text = post("/v3/kv/deleterange", request.dump(), deadline_after(timeout_));
  if (!text) return std::unexpected(text.error());
  return {};
}

Result<std::int64_t> EtcdClient::lease_grant(std::chrono::seconds ttl) {
  const Json request = {{"TTL", std::to_string(ttl.count())}};
  Result<std::string> text = post("/v3/lease/grant", request.dump(), deadline_after(timeout_));
  if (!text) return std::unexpected(text.error());
  const Json answer = Json::parse(*text, nullptr, false);
  const std::int64_t id = int_field(answer, "ID");
  if (id == 0) {
    std::string why = answer.value("error", std::string("no lease id in the answer"));
    return std::unexpected(
        Status(StatusCode::unavailable, fmt::format("etcd {}: lease grant: {}", current_, why)));
  }
  return id;
}

Result<std::int64_t> EtcdClient::lease_keepalive(std::int64_t lease) {
  const Json request = {{"ID", std::to_string(lease)}};
  Result<std::string> text = post("/v3/lease/keepalive", request.dump(), deadline_after(timeout_));
  if (!text) return std::unexpected(text.error());
  const Json answer = Json::parse(*text, nullptr, false);
  auto result = answer.find("result");
  if (result == answer.end() || !result->is_object())
    return std::unexpected(bad_answer(current_, "a keep-alive answer without a result"));
  return int_field(*result, "TTL");
}

Result<void> EtcdClient::lease_revoke(std::int64_t lease, Deadline deadline) {
  const Json request = {{"ID", std::to_string(lease)}};
  Result<std::string> text = post("/v3/lease/revoke", request.dump(), deadline);
  if (!text) return std::unexpected(text.error());
  return {};
}

Result<EtcdWatch> EtcdClient::watch_prefix(std::string_view prefix, std::int64_t start_revision) {
  const Json request = {{"create_request",
                         {{"key", base64_encode(prefix)},
                          {"range_end", base64_encode(etcd_prefix_end(prefix))},
                          {"start_revision", std::to_string(start_revision)}}}};
  const std::string body = request.dump();
  const Deadline deadline = deadline_after(timeout_);
  Status last(StatusCode::unavailable, "no etcd endpoint");
  const std::size_t n = endpoints_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t index = (next_ + i) % n;
    const std::string& endpoint = endpoints_[index];
    if (stop_ != nullptr && *stop_)
      return std::unexpected(Status(StatusCode::cancelled, "stopped"));
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    const Deadline attempt = i + 1 == n ? deadline : Clock::now() + left / static_cast<int>(n - i);
    Result<net::TcpStream> stream = open_request(endpoint, "/v3/watch", body, true, attempt);
    if (!stream) {
      last = stream.error();
      continue;
    }
    std::string buffer;
    Result<Head> head = read_head(*stream, buffer, attempt, endpoint);
    if (!head) {
      last = head.error();
      if (last.code() == StatusCode::internal) return std::unexpected(last);
      continue;
    }
    if (head->status != 200 || !head->chunked) {
      Result<std::string> text = read_body(*stream, buffer, *head, attempt, endpoint);
      if (!text) return std::unexpected(text.error());
      Result<Json> answer = parse_answer(endpoint, head->status, *text);
      if (!answer) return std::unexpected(answer.error());
      return std::unexpected(bad_answer(endpoint, "a watch answer that is not a stream"));
    }
    next_ = index;
    current_ = endpoint;
    EtcdWatch watch(std::move(*stream), std::move(buffer), endpoint);
    // The first message confirms the watch ("created"); it carries no events.
    std::int64_t revision = 0;
    Result<std::vector<EtcdEvent>> created = watch.next(attempt, revision);
    if (!created) return std::unexpected(created.error());
    return watch;
  }
  return std::unexpected(last);
}

}  // namespace tern::rpc::detail
