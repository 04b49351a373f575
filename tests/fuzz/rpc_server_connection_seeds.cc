// Writes the seed corpus of rpc_server_connection_fuzz (tests/fuzz/corpus/rpc_server_connection)
// into the directory given: a control byte and a connection's bytes for each kind of traffic a
// client can send (calls, pipelines, pings, cancels, goaways, compressed bodies, a zstd bomb,
// garbage, truncated frames, resets, never reading), named after the outcome they are written
// for (rpc_server_connection_corpus_check.cc).
// The checked-in seeds were made with: rpc_server_connection_seeds
// tests/fuzz/corpus/rpc_server_connection
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "rpc_server_connection_parse.h"
#include "seed_files.h"
#include "tern/net/buffer.h"

namespace {

namespace detail = tern::rpc::detail;
namespace wire = tern::rpc::wire;
using detail::FrameType;
using tern::fuzz::kReadBack;
using tern::fuzz::kReset;
using tern::fuzz::Seed;

// Frames of one connection, built with the codec.
class Connection {
 public:
  Connection& frame(FrameType type, std::uint64_t call_id, const wire::Metadata* metadata,
                    std::string_view body, bool compress = false) {
    detail::append_frame(out_, type, call_id, metadata, detail::as_bytes(body), compress);
    return *this;
  }
  Connection& call(FrameType type, std::uint64_t call_id, std::string_view method,
                   std::string_view text, bool compress = false) {
    wire::Metadata metadata;
    metadata.set_service(std::string(tern::fuzz::kFuzzService));
    metadata.set_method(std::string(method));
    return frame(type, call_id, &metadata, body(text), compress);
  }
  Connection& raw_frame(FrameType type, std::uint64_t id, std::uint16_t flags,
                        std::string_view body) {
    detail::append_stream_frame(out_, type, id, flags, nullptr, detail::as_bytes(body));
    return *this;
  }
  Connection& raw(std::string_view bytes) {
    out_.append(detail::as_bytes(bytes));
    return *this;
  }

  // The seed: the control byte, then the bytes (the first `keep` of them when given).
  Seed seed(std::string name, std::uint8_t control, std::size_t keep = SIZE_MAX) const {
    const std::span<const std::byte> bytes = out_.readable();
    std::string text(1, static_cast<char>(control));
    text.append(reinterpret_cast<const char*>(bytes.data()), std::min(keep, bytes.size()));
    return {std::move(name), std::move(text)};
  }

  // An Echo request body: a Metadata message holding `text`.
  static std::string body(std::string_view text) {
    wire::Metadata message;
    message.set_status_message(std::string(text));
    std::string bytes;
    message.SerializeToString(&bytes);
    return bytes;
  }

 private:
  tern::net::Buffer out_;
};

// A 24-byte header with exactly these fields.
std::string header(std::uint32_t magic, std::uint8_t type, std::uint16_t flags,
                   std::uint64_t call_id, std::uint32_t metadata_size, std::uint32_t body_size) {
  std::string bytes(detail::kHeaderSize, '\0');
  auto* out = reinterpret_cast<std::byte*>(bytes.data());
  tern::net::store_big_endian(out, 4, magic);
  out[4] = std::byte{detail::kVersion};
  out[5] = std::byte{type};
  tern::net::store_big_endian(out + 6, 2, flags);
  tern::net::store_big_endian(out + 8, 8, call_id);
  tern::net::store_big_endian(out + 16, 4, metadata_size);
  tern::net::store_big_endian(out + 20, 4, body_size);
  return bytes;
}

// The metadata of a goaway or a stream reset: a status and why.
wire::Metadata status_metadata(std::uint32_t status, std::string_view why) {
  wire::Metadata metadata;
  metadata.set_status(status);
  metadata.set_status_message(std::string(why));
  return metadata;
}

}  // namespace

int main(int argc, char** argv) {
  using tern::fuzz::kEchoMethod;
  using tern::fuzz::kHoldMethod;
  using tern::fuzz::kStreamMethod;
  std::vector<Seed> seeds;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a body that compresses well; ";

  seeds.push_back(Connection()
                      .call(FrameType::request, 1, kEchoMethod, "hello")
                      .seed("answered-echo", kReadBack));
  seeds.push_back(Connection()
                      .call(FrameType::request, 1, kEchoMethod, "in bytes of one to seven")
                      .seed("answered-echo_trickled", kReadBack | 7));
  seeds.push_back(Connection()
                      .call(FrameType::request, 1, kEchoMethod, text, true)
                      .seed("answered-compressed", kReadBack));
  {
    Connection pipeline;
    pipeline.call(FrameType::request, 1, kEchoMethod, "one")
        .call(FrameType::request, 2, kHoldMethod, "held")
        .frame(FrameType::ping, 7, nullptr, "")
        .call(FrameType::request, 3, kEchoMethod, text, true)
        .frame(FrameType::cancel, 2, nullptr, "")
        .call(FrameType::one_way, 4, kEchoMethod, "one way")
        .call(FrameType::request, 5, kHoldMethod, "held to the end");
    seeds.push_back(pipeline.seed("answered-pipeline", kReadBack | 3));
    seeds.push_back(pipeline.seed("survived-pipeline_reset", kReset));
    seeds.push_back(pipeline.seed("survived-pipeline_never_read", 0));
  }
  {
    Connection holds;
    for (std::uint64_t id = 1; id <= 64; ++id) holds.call(FrameType::request, id, kHoldMethod, "");
    for (std::uint64_t id = 1; id <= 64; id += 2) holds.frame(FrameType::cancel, id, nullptr, "");
    seeds.push_back(holds.seed("survived-holds_cancelled_then_reset", kReset));
  }
  {
    Connection pings;
    for (std::uint64_t id = 1; id <= 200; ++id) pings.frame(FrameType::ping, id, nullptr, "");
    seeds.push_back(pings.seed("ponged-ping_flood", kReadBack));
    seeds.push_back(pings.seed("survived-ping_flood_never_read", 0));
  }
  {
    // 16 MiB of zeros in about 500 bytes: a decompression bomb far over every limit.
    wire::Metadata metadata;
    metadata.set_service(std::string(tern::fuzz::kFuzzService));
    metadata.set_method(std::string(kEchoMethod));
    Connection bomb;
    bomb.frame(FrameType::request, 1, &metadata, std::string(16u << 20, '\0'), true)
        .call(FrameType::request, 2, kEchoMethod, "after the bomb");
    seeds.push_back(bomb.seed("survived-zstd_bomb", kReadBack));
  }
  {
    wire::Metadata metadata;
    metadata.set_service(std::string(tern::fuzz::kFuzzService));
    metadata.set_method(std::string(kEchoMethod));
    for (int i = 0; i < 2000; ++i) metadata.add_entries();
    Connection entries;
    entries.frame(FrameType::request, 1, &metadata, Connection::body("many entries"));
    seeds.push_back(entries.seed("responded-empty_metadata_entries", kReadBack));
  }
  seeds.push_back(Connection()
                      .call(FrameType::request, 1, "NoSuchMethod", "x")
                      .seed("responded-unknown_method", kReadBack));
  const wire::Metadata goaway = status_metadata(14, "the client is leaving");
  seeds.push_back(Connection()
                      .call(FrameType::request, 1, kEchoMethod, "before goaway")
                      .frame(FrameType::goaway, 0, &goaway, "")
                      .seed("survived-client_goaway", kReadBack));
  seeds.push_back(
      Connection().raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n").seed("rejected-http", kReadBack));
  seeds.push_back(
      Connection().raw(header(0x54525044, 1, 0, 1, 0, 0)).seed("rejected-bad_magic", kReadBack));
  seeds.push_back(Connection()
                      .raw(header(detail::kMagic, 1, 0, 1, 0, 1u << 30))
                      .seed("rejected-frame_too_large", kReadBack));
  seeds.push_back(Connection()
                      .call(FrameType::request, 1, kEchoMethod, "fine")
                      .raw(header(detail::kMagic, 2, 0, 1, 0, 0))
                      .seed("rejected-response_from_a_client", kReadBack));
  seeds.push_back(Connection()
                      .call(FrameType::request, 1, kEchoMethod, "cut short")
                      .seed("survived-truncated", kReadBack, 30));
  seeds.push_back(Connection()
                      .call(FrameType::request, 1, kEchoMethod, "cut short")
                      .seed("survived-truncated_reset", kReset, 30));
  {
    // A stream: opened, two messages, a credit, the end of the client's side.
    Connection stream;
    std::byte credit[4] = {std::byte{0}, std::byte{1}, std::byte{0}, std::byte{0}};
    stream.call(FrameType::stream_open, 1, kStreamMethod, "")
        .raw_frame(FrameType::stream_message, 1, 0, Connection::body("first"))
        .raw_frame(FrameType::stream_message, 1, 0, Connection::body("second"))
        .raw_frame(FrameType::stream_credit, 1, 0,
                   std::string_view(reinterpret_cast<const char*>(credit), 4))
        .raw_frame(FrameType::stream_message, 1, detail::kFlagEndStream, "")
        .call(FrameType::request, 2, kEchoMethod, "beside the stream");
    seeds.push_back(stream.seed("streamed-echo", kReadBack));
    seeds.push_back(stream.seed("streamed-echo_trickled", kReadBack | 5));
    seeds.push_back(stream.seed("survived-stream_reset", kReset));
  }
  // A stream reset by the client, then frames for it and for a stream never opened.
  const wire::Metadata gave_up = status_metadata(1, "the client gave up");
  seeds.push_back(Connection()
                      .call(FrameType::stream_open, 1, kStreamMethod, "")
                      .raw_frame(FrameType::stream_message, 1, 0, Connection::body("one"))
                      .frame(FrameType::stream_reset, 1, &gave_up, "")
                      .raw_frame(FrameType::stream_message, 1, 0, Connection::body("late"))
                      .raw_frame(FrameType::stream_message, 9, 0, Connection::body("never opened"))
                      .seed("rejected-stream_never_opened", kReadBack));
  // A second stream under the id of one still open: a protocol error, and the first stream ends
  // with the connection.
  seeds.push_back(Connection()
                      .call(FrameType::stream_open, 1, kStreamMethod, "")
                      .call(FrameType::stream_open, 1, kStreamMethod, "")
                      .raw_frame(FrameType::stream_message, 1, 0, Connection::body("to which?"))
                      .seed("rejected-stream_opened_twice", kReadBack));
  // A second stream under the id of one reset before its handler ran: a protocol error (ids are
  // never reused), and the first stream's handler ends with the connection.
  seeds.push_back(Connection()
                      .call(FrameType::stream_open, 1, kStreamMethod, "")
                      .frame(FrameType::stream_reset, 1, &gave_up, "")
                      .call(FrameType::stream_open, 1, kStreamMethod, "")
                      .seed("rejected-stream_reopened_after_reset", kReadBack));
  seeds.push_back(Connection()
                      .call(FrameType::stream_open, 1, kEchoMethod, "")
                      .call(FrameType::request, 2, kStreamMethod, "x")
                      .seed("survived-wrong_kinds", kReadBack));
  seeds.push_back(Connection()
                      .raw(header(detail::kMagic, 10, 0, 1, 0, 0))
                      .seed("rejected-stream_frame_in_version_1", kReadBack));
  return tern::fuzz::write_seed_files(argc, argv, seeds);
}
