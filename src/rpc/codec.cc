#include "codec.h"

#include <google/protobuf/message_lite.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "metadata.pb.h"

namespace tern::rpc::detail {

namespace {

constexpr int kZstdLevel = 1;

// Reserves the header, runs fill(metadata_size) to append metadata and body, then writes the
// header with the sizes that were appended.
template <typename FillBody>
void build_frame(net::Buffer& out, FrameType type, std::uint64_t call_id,
                 const wire::Metadata* metadata, std::uint16_t flags, FillBody fill_body) {
  const std::size_t start = out.size();
  (void)out.writable(kHeaderSize);
  out.commit(kHeaderSize);
  std::uint32_t metadata_size = 0;
  if (metadata != nullptr) {
    metadata_size = static_cast<std::uint32_t>(metadata->ByteSizeLong());
    if (metadata_size > 0) {
      std::span<std::byte> room = out.writable(metadata_size);
      metadata->SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(room.data()));
      out.commit(metadata_size);
    }
  }
  const std::size_t body_start = out.size();
  fill_body();
  FrameHeader header;
  header.type = type;
  header.flags = flags;
  header.call_id = call_id;
  header.metadata_size = metadata_size;
  header.body_size = static_cast<std::uint32_t>(out.size() - body_start);
  encode_header(header, const_cast<std::byte*>(out.readable().data()) + start);
}

void append_compressed(net::Buffer& out, std::span<const std::byte> plain) {
  const std::size_t bound = ZSTD_compressBound(plain.size());
  std::span<std::byte> room = out.writable(bound);
  const std::size_t written =
      ZSTD_compress(room.data(), bound, plain.data(), plain.size(), kZstdLevel);
  // Compressing into a buffer of ZSTD_compressBound bytes cannot fail.
  out.commit(ZSTD_isError(written) ? 0 : written);
}

// One decompression context per thread, reused for every body (ZSTD_decompress would allocate
// one per call).
ZSTD_DCtx* decompression_context() {
  struct Context {
    ZSTD_DCtx* context = ZSTD_createDCtx();
    ~Context() { ZSTD_freeDCtx(context); }
  };
  thread_local Context context;
  return context.context;
}

// Decompresses a zstd frame that does not declare its size, growing `scratch` as output comes,
// never past `limit`.
tern::Result<std::span<const std::byte>> stream_decompress(std::span<const std::byte> body,
                                                           std::size_t limit,
                                                           std::string& scratch) {
  ZSTD_DCtx* context = decompression_context();
  ZSTD_DCtx_reset(context, ZSTD_reset_session_only);
  ZSTD_inBuffer in{body.data(), body.size(), 0};
  std::size_t produced = 0;
  scratch.resize(std::min<std::size_t>(limit, ZSTD_DStreamOutSize()));
  for (;;) {
    ZSTD_outBuffer out{scratch.data(), scratch.size(), produced};
    const std::size_t left = ZSTD_decompressStream(context, &out, &in);
    produced = out.pos;
    if (ZSTD_isError(left)) return fail(make_error_code(ProtocolErrc::bad_compression));
    if (left == 0) {
      // The frame ended: it must be the whole body.
      if (in.pos != in.size) return fail(make_error_code(ProtocolErrc::bad_compression));
      scratch.resize(produced);
      return as_bytes(scratch);
    }
    if (produced < scratch.size()) {
      // Room left but no progress possible: the body ended in the middle of the frame.
      if (in.pos == in.size) return fail(make_error_code(ProtocolErrc::bad_compression));
      continue;
    }
    if (scratch.size() >= limit) return fail(std::errc::message_size);
    scratch.resize(std::min(limit, scratch.size() * 2));
  }
}

}  // namespace

void append_frame(net::Buffer& out, FrameType type, std::uint64_t call_id,
                  const wire::Metadata* metadata, std::span<const std::byte> body, bool compress) {
  build_frame(out, type, call_id, metadata, compress ? kFlagCompressed : 0, [&] {
    if (compress) {
      append_compressed(out, body);
    } else if (!body.empty()) {
      out.append(body);
    }
  });
}

void append_message_frame(net::Buffer& out, FrameType type, std::uint64_t call_id,
                          const wire::Metadata* metadata,
                          const google::protobuf::MessageLite& message, bool compress) {
  if (compress) {
    thread_local std::string plain;
    plain.clear();
    message.SerializeToString(&plain);
    append_frame(out, type, call_id, metadata, as_bytes(plain), true);
    return;
  }
  build_frame(out, type, call_id, metadata, 0, [&] {
    const std::size_t size = message.ByteSizeLong();
    std::span<std::byte> room = out.writable(size);
    message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(room.data()));
    out.commit(size);
  });
}

void append_stream_frame(net::Buffer& out, FrameType type, std::uint64_t stream_id,
                         std::uint16_t flags, const wire::Metadata* metadata,
                         std::span<const std::byte> body) {
  build_frame(out, type, stream_id, metadata, flags, [&] {
    if (!body.empty()) out.append(body);
  });
}

std::size_t append_stream_message(net::Buffer& out, std::uint64_t stream_id,
                                  const google::protobuf::MessageLite& message) {
  std::size_t size = 0;
  build_frame(out, FrameType::stream_message, stream_id, nullptr, 0, [&] {
    size = message.ByteSizeLong();
    std::span<std::byte> room = out.writable(size);
    message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(room.data()));
    out.commit(size);
  });
  return size;
}

tern::Result<void> parse_metadata(std::span<const std::byte> bytes, wire::Metadata& metadata) {
  metadata.Clear();
  if (bytes.empty()) return {};
  if (!metadata.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return fail(make_error_code(ProtocolErrc::bad_metadata));
  }
  return {};
}

tern::Result<std::span<const std::byte>> plain_body(const RawFrame& frame, std::size_t limit,
                                                    std::string& scratch) {
  if ((frame.header.flags & kFlagCompressed) == 0) return frame.body;
  const unsigned long long declared =
      ZSTD_getFrameContentSize(frame.body.data(), frame.body.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR)
    return fail(make_error_code(ProtocolErrc::bad_compression));
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN) {
    if (declared > limit) return fail(std::errc::message_size);
    scratch.resize(static_cast<std::size_t>(declared));
    const std::size_t got =
        ZSTD_decompressDCtx(decompression_context(), scratch.data(), scratch.size(),
                            frame.body.data(), frame.body.size());
    if (ZSTD_isError(got) || got != declared) {
      return fail(make_error_code(ProtocolErrc::bad_compression));
    }
    return as_bytes(scratch);
  }
  return stream_decompress(frame.body, limit, scratch);
}

}  // namespace tern::rpc::detail
