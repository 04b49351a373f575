// Writes the seed corpus of rpc_frame_fuzz (tests/fuzz/corpus/rpc_frame) into the directory given:
// one file per kind of frame, built with the codec, and one with a connection's worth of frames.
// The checked-in seeds were made with: rpc_frame_seeds tests/fuzz/corpus/rpc_frame
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "tern/net/buffer.h"

namespace {

namespace detail = tern::rpc::detail;
namespace wire = tern::rpc::wire;
using detail::FrameType;

// A protobuf body: field 1 (a string) holding `text`.
std::string message_body(std::string_view text) {
  std::string body;
  body += '\x0a';
  body += static_cast<char>(text.size());
  body += text;
  return body;
}

wire::Metadata call_metadata(std::string_view method) {
  wire::Metadata metadata;
  metadata.set_service("tern.example.Greeter");
  metadata.set_method(std::string(method));
  return metadata;
}

void append(tern::net::Buffer& out, FrameType type, std::uint64_t call_id,
            const wire::Metadata* metadata, std::string_view body, bool compress = false) {
  detail::append_frame(out, type, call_id, metadata, detail::as_bytes(body), compress);
}

bool write(const std::filesystem::path& dir, std::string_view name, const tern::net::Buffer& out) {
  const std::filesystem::path path = dir / name;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  const std::span<const std::byte> bytes = out.readable();
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), error.message().c_str());
    return 1;
  }

  wire::Metadata request = call_metadata("Say");
  request.set_timeout_us(250'000);
  wire::MetadataEntry* entry = request.add_entries();
  entry->set_key("authorization");
  entry->set_value("Bearer seed");
  const std::string body = message_body("tern");
  std::string long_text;
  for (int i = 0; i < 64; ++i) long_text += "a body that compresses well; ";
  const std::string big_body = message_body(long_text.substr(0, 120)) + long_text;

  wire::Metadata ok_reply;
  entry = ok_reply.add_entries();
  entry->set_key("served-by");
  entry->set_value("seed");
  wire::Metadata error_reply;
  error_reply.set_status(5);
  error_reply.set_status_message("no such greeting");
  wire::Metadata goaway;
  goaway.set_status(14);
  goaway.set_status_message("the server is shutting down");
  goaway.set_last_call_id(7);
  const wire::Metadata notify = call_metadata("Note");
  const wire::Metadata push = call_metadata("News");

  bool ok = true;
  auto one = [&](std::string_view name, auto&& build) {
    tern::net::Buffer out;
    build(out);
    ok = write(dir, name, out) && ok;
  };
  one("request", [&](auto& out) { append(out, FrameType::request, 1, &request, body); });
  one("request_compressed",
      [&](auto& out) { append(out, FrameType::request, 2, &request, big_body, true); });
  one("one_way", [&](auto& out) { append(out, FrameType::one_way, 3, &notify, body); });
  one("response", [&](auto& out) { append(out, FrameType::response, 1, &ok_reply, body); });
  one("response_compressed",
      [&](auto& out) { append(out, FrameType::response, 2, nullptr, big_body, true); });
  one("response_error", [&](auto& out) { append(out, FrameType::response, 4, &error_reply, ""); });
  one("push", [&](auto& out) { append(out, FrameType::push, 0, &push, body); });
  one("ping", [&](auto& out) { append(out, FrameType::ping, 9, nullptr, ""); });
  one("pong", [&](auto& out) { append(out, FrameType::pong, 9, nullptr, ""); });
  one("goaway", [&](auto& out) { append(out, FrameType::goaway, 0, &goaway, ""); });
  one("cancel", [&](auto& out) { append(out, FrameType::cancel, 2, nullptr, ""); });
  one("connection", [&](auto& out) {
    append(out, FrameType::request, 1, &request, body);
    append(out, FrameType::ping, 1, nullptr, "");
    append(out, FrameType::request, 2, &request, big_body, true);
    append(out, FrameType::cancel, 2, nullptr, "");
    append(out, FrameType::one_way, 3, &notify, body);
    append(out, FrameType::goaway, 0, &goaway, "");
  });
  return ok ? 0 : 1;
}
