// The two checks the RPC server makes on a request before building it (src/rpc): the shape of a
// metadata block read from its wire bytes (against what protobuf's parser builds from the same
// bytes), and the decompression of a body bounded by a limit (declared sizes, streamed frames,
// broken frames).
#include <gtest/gtest.h>
#include <zstd.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "rpc/metadata_limits.h"

namespace {

namespace wire = tern::rpc::wire;
namespace detail = tern::rpc::detail;

std::span<const std::byte> bytes_of(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

wire::Metadata with_entries(int count, std::size_t key_size, std::size_t value_size) {
  wire::Metadata metadata;
  metadata.set_service("tern.test.Service");
  metadata.set_method("Method");
  metadata.set_timeout_us(1000);
  for (int i = 0; i < count; ++i) {
    wire::MetadataEntry* entry = metadata.add_entries();
    entry->set_key(std::string(key_size, 'k'));
    entry->set_value(std::string(value_size, 'v'));
  }
  return metadata;
}

TEST(MetadataShape, CountsWhatTheParserBuilds) {
  for (const int count : {0, 1, 7, 300}) {
    const std::string bytes = with_entries(count, 5, 11).SerializeAsString();
    const detail::MetadataShape shape = detail::metadata_shape(bytes_of(bytes), 1000);
    wire::Metadata parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    EXPECT_TRUE(shape.well_formed);
    EXPECT_EQ(shape.entries, static_cast<std::size_t>(parsed.entries_size()));
    EXPECT_EQ(shape.largest_entry, count > 0 ? 16u : 0u);
  }
}

TEST(MetadataShape, StopsCountingPastTheLimit) {
  const std::string bytes = with_entries(30'000, 0, 0).SerializeAsString();
  const detail::MetadataShape shape = detail::metadata_shape(bytes_of(bytes), 256);
  EXPECT_TRUE(shape.well_formed);
  EXPECT_EQ(shape.entries, 257u) << "one past the limit is enough to refuse";
}

TEST(MetadataShape, TheLastKeyOfAnEntryCountsAsTheParserKeepsIt) {
  // One entry whose key field appears twice: 100 bytes, then 3 (protobuf keeps the last).
  wire::MetadataEntry first;
  first.set_key(std::string(100, 'a'));
  wire::MetadataEntry second;
  second.set_key("abc");
  second.set_value("xy");
  const std::string entry = first.SerializeAsString() + second.SerializeAsString();
  std::string bytes;
  bytes += static_cast<char>((6 << 3) | 2);  // field 6, length-delimited
  bytes += static_cast<char>(entry.size());
  bytes += entry;
  wire::Metadata parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.entries_size(), 1);
  const detail::MetadataShape shape = detail::metadata_shape(bytes_of(bytes), 10);
  EXPECT_EQ(shape.entries, 1u);
  EXPECT_EQ(shape.largest_entry, parsed.entries(0).key().size() + parsed.entries(0).value().size());
}

TEST(MetadataShape, MalformedBytesAreLeftToTheParser) {
  const std::string bytes = with_entries(3, 4, 4).SerializeAsString();
  // Cut in the middle of the last entry, and a length running past the end.
  for (const std::string& broken :
       {bytes.substr(0, bytes.size() - 2), std::string("\x32\x7f", 2), std::string("\x0f", 1)}) {
    EXPECT_FALSE(detail::metadata_shape(bytes_of(broken), 10).well_formed);
    wire::Metadata parsed;
    EXPECT_FALSE(parsed.ParseFromString(broken));
  }
}

// A compressed frame of `plain`; `declare_size`: whether the zstd frame records its size.
std::string compress(std::string_view plain, bool declare_size) {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, declare_size ? 1 : 0);
  std::string out(ZSTD_compressBound(plain.size()), '\0');
  ZSTD_inBuffer in{plain.data(), plain.size(), 0};
  ZSTD_outBuffer to{out.data(), out.size(), 0};
  if (declare_size) ZSTD_CCtx_setPledgedSrcSize(context, plain.size());
  while (ZSTD_compressStream2(context, &to, &in, ZSTD_e_end) != 0) {
  }
  ZSTD_freeCCtx(context);
  out.resize(to.pos);
  return out;
}

detail::RawFrame compressed_frame(const std::string& body) {
  detail::RawFrame frame;
  frame.header.flags = detail::kFlagCompressed;
  frame.header.body_size = static_cast<std::uint32_t>(body.size());
  frame.body = bytes_of(body);
  return frame;
}

TEST(PlainBody, DeclaredSizeOverTheLimitFailsBeforeAllocating) {
  const std::string bomb = compress(std::string(64u << 20, '\0'), true);
  ASSERT_LT(bomb.size(), 8u << 10);
  std::string scratch;
  tern::Result<std::span<const std::byte>> body =
      detail::plain_body(compressed_frame(bomb), 4u << 20, scratch);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error(), std::errc::message_size);
  EXPECT_EQ(scratch.capacity(), std::string().capacity()) << "nothing was allocated";
}

TEST(PlainBody, UndeclaredSizeStopsAtTheLimit) {
  constexpr std::size_t kLimit = 1u << 20;
  const std::string plain(kLimit, 'p');
  const std::string fits = compress(plain, false);
  ASSERT_EQ(ZSTD_getFrameContentSize(fits.data(), fits.size()), ZSTD_CONTENTSIZE_UNKNOWN);
  std::string scratch;
  tern::Result<std::span<const std::byte>> body =
      detail::plain_body(compressed_frame(fits), kLimit, scratch);
  ASSERT_TRUE(body) << body.error().message();
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(body->data()), body->size()), plain);

  const std::string over = compress(std::string(kLimit + 1, 'p'), false);
  body = detail::plain_body(compressed_frame(over), kLimit, scratch);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error(), std::errc::message_size);
  EXPECT_LE(scratch.size(), kLimit);
}

TEST(PlainBody, BrokenFramesAreBadCompression) {
  const std::string whole = compress(std::string(100'000, 'w'), false);
  const std::string declared = compress("declared", true);
  for (const std::string& broken : {whole.substr(0, whole.size() / 2), whole + "trailing bytes",
                                    declared + declared, std::string("not a zstd frame at all")}) {
    std::string scratch;
    tern::Result<std::span<const std::byte>> body =
        detail::plain_body(compressed_frame(broken), 1u << 20, scratch);
    ASSERT_FALSE(body);
    EXPECT_EQ(body.error(), make_error_code(detail::ProtocolErrc::bad_compression))
        << body.error().message();
  }
}

TEST(PlainBody, AnUncompressedBodyIsTheFrameItself) {
  const std::string text = "plain text";
  detail::RawFrame frame;
  frame.body = bytes_of(text);
  std::string scratch;
  tern::Result<std::span<const std::byte>> body = detail::plain_body(frame, 1, scratch);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->data(), frame.body.data());
}

}  // namespace
