#pragma once

// The producer side of tern::log, inlined into every call site: argument encoding, the
// per-thread ring's reserve/commit fast path, and the record layout the writer decodes.
// Included by <tern/log/log.h>; not for direct use.

#include <fmt/core.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "tern/log/level.h"

namespace tern::log {

// Writes where the calling thread is ("w0 f'conn'#12") into out (at most capacity bytes) and
// returns the length, or 0 when the thread is not running a fiber. Called on the logging thread.
using ContextProvider = std::size_t (*)(char* out, std::size_t capacity) noexcept;

// A message longer than this is cut (at a UTF-8 character boundary) and ends with " [truncated]".
inline constexpr std::size_t kMaxMessageBytes = 4096;
// The longest thread/fiber context a provider may write.
inline constexpr std::size_t kMaxContextBytes = 64;

namespace detail {

// The most "{}" fields a format may have for the writer's fast path.
inline constexpr std::size_t kMaxSimpleFields = 16;

// What the writer learns about a call site's format the first time it formats a record of it:
// whether every field is a plain "{}", and where the literal text around the fields is. Only
// the holder of the writer's consumer lock reads or writes it.
struct SiteCache {
  std::uint8_t state = 0;  // 0: not looked at yet, 1: plain fields only, 2: anything else
  std::uint8_t fields = 0;
  std::uint16_t literal_at[kMaxSimpleFields + 1] = {};  // text before field i, and after all
  std::uint16_t literal_size[kMaxSimpleFields + 1] = {};
};

// What a call site knows at compile time.
struct Site {
  Level level;
  std::uint32_t line;
  std::string_view file;    // base name of __FILE__
  std::string_view format;  // a string literal: it outlives every record that points to it
  SiteCache* cache = nullptr;
};

// The part of a path after its last '/'.
constexpr std::string_view base_name(std::string_view path) noexcept {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Where the writer formats a record's message (defined in src/log).
struct Output;
// Formats a deferred record's arguments into out; one instance per argument type list.
using Decoder = void (*)(const char* payload, const Site& site, Output& out);

// Formats `format` with args into out; a format error becomes text in the line. Writer side.
void format_message(Output& out, std::string_view format, fmt::format_args args) noexcept;

// A decoded argument for the writer's fast path, which prints each "{}" as fmt would.
struct SimpleArg {
  enum class Kind : std::uint8_t { i64, u64, f32, f64, f80, boolean, character, text, address };
  Kind kind;
  union {
    std::int64_t i64;
    std::uint64_t u64;
    float f32;
    double f64;
    long double f80;
    bool boolean;
    char character;
    const void* address;
    struct {
      const char* data;
      std::size_t size;
    } text;
  };
  template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>)
  SimpleArg(T value) noexcept {  // NOLINT: implicit on purpose
    if constexpr (std::is_signed_v<T>) {
      kind = Kind::i64;
      i64 = value;
    } else {
      kind = Kind::u64;
      u64 = value;
    }
  }
  SimpleArg(bool value) noexcept : kind(Kind::boolean), boolean(value) {}
  SimpleArg(char value) noexcept : kind(Kind::character), character(value) {}
  SimpleArg(float value) noexcept : kind(Kind::f32), f32(value) {}
  SimpleArg(double value) noexcept : kind(Kind::f64), f64(value) {}
  SimpleArg(long double value) noexcept : kind(Kind::f80), f80(value) {}
  SimpleArg(std::string_view value) noexcept : kind(Kind::text), text{value.data(), value.size()} {}
  SimpleArg(const void* value) noexcept : kind(Kind::address), address(value) {}
};

// Formats a site whose fields are all "{}" without fmt's parser; false (nothing written) when
// the site's format is anything else or the argument count differs. Writer side.
bool format_simple(Output& out, const Site& site, const SimpleArg* args,
                   std::size_t count) noexcept;

enum class RecordKind : std::uint8_t { filler, deferred, text };

// The start of every record in a ring; records are 8-byte aligned and `size` includes padding.
struct RecordHeader {
  std::uint32_t size;
  RecordKind kind;
  std::uint8_t context_size;  // bytes of context text after the header (0: the thread's id)
  std::uint8_t truncated;     // text records: the caller cut the message
  std::uint8_t unused;
  const Site* site;
  Decoder decode;       // deferred records
  std::uint64_t stamp;  // TSC ticks or CLOCK_REALTIME nanoseconds (see stamp())
};
static_assert(sizeof(RecordHeader) == 32);
static_assert(offsetof(RecordHeader, kind) + sizeof(RecordKind) <= 8);

// Pads the end of a ring (at least 8 bytes): only the header's size and kind are written.
inline void write_filler(char* at, std::size_t size) noexcept {
  const auto bytes = static_cast<std::uint32_t>(size);
  const RecordKind kind = RecordKind::filler;
  std::memcpy(at + offsetof(RecordHeader, size), &bytes, sizeof bytes);
  std::memcpy(at + offsetof(RecordHeader, kind), &kind, sizeof kind);
}

// Reads the header of the record at `at`; false for a filler (of which only `size` is read).
inline bool read_header(const char* at, RecordHeader* header) noexcept {
  RecordKind kind;
  std::memcpy(&kind, at + offsetof(RecordHeader, kind), sizeof kind);
  if (kind == RecordKind::filler) {
    std::memcpy(&header->size, at + offsetof(RecordHeader, size), sizeof header->size);
    return false;
  }
  std::memcpy(header, at, sizeof *header);
  return true;
}

// The producing thread's half of its ring. Only `published` is read by the writer thread.
struct RingProducer {
  char* data = nullptr;
  std::uint64_t mask = 0;        // capacity - 1 (a power of two)
  std::uint64_t tail = 0;        // next byte to write (producer)
  std::uint64_t limit = 0;       // tail may grow to here without reading the writer's head
  std::uint32_t generation = 0;  // the configuration this ring belongs to
  alignas(64) std::atomic<std::uint64_t> published{0};  // tail as the writer may read it
};

// Read on every call, written by init/shutdown/set_level: kept on one cache line.
struct alignas(64) Shared {
  std::atomic<std::uint8_t> level{TERN_LOG_LEVEL_INFO};
  std::atomic<bool> tsc{false};              // stamps are TSC ticks (fixed before async starts)
  std::atomic<std::uint32_t> generation{0};  // bumped when rings must be looked at again
  std::atomic<ContextProvider> provider{nullptr};
};
inline constinit Shared shared{};

// 0: the writer is draining; 1: it naps between passes; 2: it sleeps until woken.
struct alignas(64) WriterState {
  std::atomic<std::uint32_t> state{0};
};
inline constinit WriterState writer_state{};

// The calling thread's ring while the logger is asynchronous (else null or stale).
inline constinit thread_local RingProducer* thread_ring = nullptr;

// Whether a record at this level passes the run-time filter. Any thread.
inline bool enabled(Level level) noexcept {
  return static_cast<std::uint8_t>(level) >= shared.level.load(std::memory_order_relaxed);
}

// A record's time: TSC ticks when the logger calibrated the TSC, else CLOCK_REALTIME ns.
inline std::uint64_t stamp() noexcept {
#if defined(__x86_64__)
  if (shared.tsc.load(std::memory_order_relaxed)) return __builtin_ia32_rdtsc();
#endif
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(now.tv_nsec);
}

// The ring was full or wraps: waits, drops or gives up (slow path, src/log). `dropped` tells a
// dropped record from a ring that can no longer be used (the caller then writes synchronously).
struct Reserved {
  char* at;
  bool dropped;
};
Reserved reserve_slow(RingProducer* ring, std::size_t size) noexcept;
// The writer naps or sleeps: wakes it if this record warrants it.
void writer_idle(RingProducer* ring) noexcept;

// How far ahead of its tail a producer prefetches the ring for writing.
inline constexpr std::uint64_t kPrefetchBytes = 256;

// Space for `size` bytes at the ring's tail, or the slow path's answer.
inline Reserved reserve(RingProducer* ring, std::size_t size) noexcept {
  const std::uint64_t offset = ring->tail & ring->mask;
  if (offset + size <= ring->mask + 1 && ring->tail + size <= ring->limit) [[likely]]
    return {ring->data + offset, false};
  return reserve_slow(ring, size);
}

// Publishes the record reserved last.
inline void commit(RingProducer* ring, std::size_t size) noexcept {
  ring->tail += size;
  ring->published.store(ring->tail, std::memory_order_release);
  // The next records' lines were last read by the writer, on another core: ask for them now.
  __builtin_prefetch(ring->data + ((ring->tail + kPrefetchBytes) & ring->mask), 1, 3);
  if (writer_state.state.load(std::memory_order_relaxed) != 0) [[unlikely]]
    writer_idle(ring);
}

// How an argument type travels through the ring. The primary template: it does not; a call
// with such an argument is formatted by the caller (eagerly).
template <typename T>
struct Codec {
  static constexpr bool kDeferred = false;
};

// Numbers, bool and char: copied by value.
template <typename T>
  requires std::is_arithmetic_v<T>
struct Codec<T> {
  static constexpr bool kDeferred = true;
  using Decoded = T;
  static std::size_t measure(const T&) noexcept { return sizeof(T); }
  static char* put(char* at, const T& value, std::size_t) noexcept {
    std::memcpy(at, &value, sizeof value);
    return at + sizeof value;
  }
  static T get(const char*& at) noexcept {
    T value;
    std::memcpy(&value, at, sizeof value);
    at += sizeof value;
    return value;
  }
};

// Copies size bytes; short runs with fixed-size moves that overlap at the end. A memcpy of a
// run-time size inlines as `rep movs` here, whose start-up costs more than a short string's copy.
inline void copy_bytes(char* to, const char* from, std::size_t size) noexcept {
  if (size > 256) {
    std::memcpy(to, from, size);
  } else if (size >= 16) {
    for (std::size_t done = 0; done + 16 < size; done += 16)
      std::memcpy(to + done, from + done, 16);
    std::memcpy(to + size - 16, from + size - 16, 16);
  } else if (size >= 8) {
    std::memcpy(to, from, 8);
    std::memcpy(to + size - 8, from + size - 8, 8);
  } else if (size >= 4) {
    std::memcpy(to, from, 4);
    std::memcpy(to + size - 4, from + size - 4, 4);
  } else {
    for (std::size_t i = 0; i < size; ++i) to[i] = from[i];
  }
}

// Strings of every kind: copied as a 32-bit length and the bytes; read back as a string_view.
struct StringCodec {
  static constexpr bool kDeferred = true;
  using Decoded = std::string_view;
  static char* put_bytes(char* at, const char* data, std::size_t size) noexcept {
    const auto length = static_cast<std::uint32_t>(size);
    std::memcpy(at, &length, sizeof length);
    copy_bytes(at + sizeof length, data, size);
    return at + sizeof length + size;
  }
  static std::string_view get(const char*& at) noexcept {
    std::uint32_t length;
    std::memcpy(&length, at, sizeof length);
    const std::string_view text(at + sizeof length, length);
    at += sizeof length + length;
    return text;
  }
};

template <>
struct Codec<std::string_view> : StringCodec {
  static std::size_t measure(std::string_view s) noexcept { return 4 + s.size(); }
  static char* put(char* at, std::string_view s, std::size_t) noexcept {
    return put_bytes(at, s.data(), s.size());
  }
};

template <>
struct Codec<std::string> : StringCodec {
  static std::size_t measure(const std::string& s) noexcept { return 4 + s.size(); }
  static char* put(char* at, const std::string& s, std::size_t) noexcept {
    return put_bytes(at, s.data(), s.size());
  }
};

// A null C string prints as "(null)" rather than failing.
struct CStringCodec : StringCodec {
  static constexpr std::string_view kNull = "(null)";
  static std::size_t measure(const char* s) noexcept {
    return 4 + (s != nullptr ? std::strlen(s) : kNull.size());
  }
  static char* put(char* at, const char* s, std::size_t measured) noexcept {
    return put_bytes(at, s != nullptr ? s : kNull.data(), measured - 4);
  }
};
template <>
struct Codec<const char*> : CStringCodec {};
template <>
struct Codec<char*> : CStringCodec {};

template <std::size_t N>
struct Codec<char[N]> : StringCodec {
  static std::size_t measure(const char (&s)[N]) noexcept { return 4 + ::strnlen(s, N); }
  static char* put(char* at, const char (&s)[N], std::size_t measured) noexcept {
    return put_bytes(at, s, measured - 4);
  }
};

// Pointers that fmt prints as addresses: only the address travels.
struct AddressCodec {
  static constexpr bool kDeferred = true;
  using Decoded = const void*;
  static std::size_t measure(const void*) noexcept { return sizeof(const void*); }
  static char* put(char* at, const void* p, std::size_t) noexcept {
    std::memcpy(at, &p, sizeof p);
    return at + sizeof p;
  }
  static const void* get(const char*& at) noexcept {
    const void* p;
    std::memcpy(&p, at, sizeof p);
    at += sizeof p;
    return p;
  }
};
template <>
struct Codec<const void*> : AddressCodec {};
template <>
struct Codec<void*> : AddressCodec {};
template <>
struct Codec<std::nullptr_t> : AddressCodec {};

// Deferred records whose arguments exceed this are formatted by the caller instead.
inline constexpr std::size_t kMaxDeferredPayload = kMaxMessageBytes + 256;

// Rebuilds the arguments from a payload and formats them. Writer side.
template <typename... Ts>
void decode(const char* payload, const Site& site, Output& out) {
  [[maybe_unused]] const char* at = payload;
  std::tuple<typename Codec<Ts>::Decoded...> values{Codec<Ts>::get(at)...};
  std::apply(
      [&](auto&... value) {
        if constexpr (sizeof...(Ts) <= kMaxSimpleFields) {
          const SimpleArg args[sizeof...(Ts) + 1] = {SimpleArg(value)..., SimpleArg(0)};
          if (format_simple(out, site, args, sizeof...(Ts))) return;
        }
        format_message(out, site.format, fmt::make_format_args(value...));
      },
      values);
}

// Encodes a record into the calling thread's ring. False when the ring cannot take it and the
// caller must format it (too large, or the logger is no longer asynchronous).
template <typename... Args>
bool emit_deferred(RingProducer* ring, const Site& site, const Args&... args) noexcept {
  const std::uint64_t when = stamp();
  [[maybe_unused]] std::size_t sizes[sizeof...(Args) + 1];
  std::size_t payload = 0;
  {
    [[maybe_unused]] std::size_t i = 0;
    ((payload += (sizes[i++] = Codec<std::remove_cvref_t<Args>>::measure(args))), ...);
  }
  if (payload > kMaxDeferredPayload) return false;
  char context[kMaxContextBytes];
  std::size_t context_size = 0;
  if (ContextProvider provider = shared.provider.load(std::memory_order_relaxed))
    context_size = provider(context, sizeof context);
  const std::size_t size = (sizeof(RecordHeader) + context_size + payload + 7) & ~std::size_t{7};
  const Reserved space = reserve(ring, size);
  if (space.at == nullptr) return space.dropped;
  ::new (static_cast<void*>(space.at)) RecordHeader{static_cast<std::uint32_t>(size),
                                                    RecordKind::deferred,
                                                    static_cast<std::uint8_t>(context_size),
                                                    0,
                                                    0,
                                                    &site,
                                                    &decode<std::remove_cvref_t<Args>...>,
                                                    when};
  char* at = space.at + sizeof(RecordHeader);
  if (context_size != 0) {
    std::memcpy(at, context, context_size);
    at += context_size;
  }
  {
    [[maybe_unused]] std::size_t i = 0;
    ((at = Codec<std::remove_cvref_t<Args>>::put(at, args, sizes[i++])), ...);
  }
  commit(ring, size);
  return true;
}

// Formats the message on the calling thread, then queues it (asynchronous) or writes the line
// (synchronous). Any thread.
void emit_formatted(const Site& site, fmt::string_view format, fmt::format_args args) noexcept;

// One log call: deferred when every argument type can travel through the ring, else formatted
// by the caller. Any thread or fiber.
template <typename... Args>
void emit(const Site& site, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if constexpr ((Codec<std::remove_cvref_t<Args>>::kDeferred && ...)) {
    RingProducer* ring = thread_ring;
    if (ring != nullptr && ring->generation == shared.generation.load(std::memory_order_relaxed))
        [[likely]] {
      if (emit_deferred(ring, site, args...)) return;
    }
  }
  emit_formatted(site, fmt::string_view(format), fmt::make_format_args(args...));
}

// Checks a compiled-out call's format string against its arguments; never called.
template <typename... Args>
void check_format(fmt::format_string<Args...>, Args&&...) noexcept {}

// Flushes every thread's records and the sinks (waiting at most a few seconds), then aborts.
[[noreturn]] void fatal_exit() noexcept;

}  // namespace detail

}  // namespace tern::log
