// Formatting of one line: the cached date, the prefix, the message and its length limit.
#include "line.h"

#include <cstring>
#include <exception>

namespace tern::log::detail {

namespace {

constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

void put2(char* at, unsigned value) noexcept {
  at[0] = kDigitPairs[value * 2];
  at[1] = kDigitPairs[value * 2 + 1];
}

// Proleptic Gregorian year/month/day of a day count since 1970-01-01 (eras of 400 years).
void civil_from_days(std::int64_t days, int* year, unsigned* month, unsigned* day) noexcept {
  days += 719468;  // days from 0000-03-01 to 1970-01-01
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const auto day_of_era = static_cast<unsigned>(days - era * 146097);
  const unsigned year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const unsigned day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const unsigned month_from_march = (5 * day_of_year + 2) / 153;
  *day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
  *month = month_from_march < 10 ? month_from_march + 3 : month_from_march - 9;
  *year = static_cast<int>(year_of_era + era * 400 + (*month <= 2 ? 1 : 0));
}

}  // namespace

char* DateCache::write(char* at, std::uint64_t ns) noexcept {
  const auto second = static_cast<std::int64_t>(ns / 1'000'000'000);
  if (second != second_) {
    second_ = second;
    const std::int64_t days = second / 86400;
    const auto in_day = static_cast<unsigned>(second % 86400);
    int year = 0;
    unsigned month = 0, day = 0;
    civil_from_days(days, &year, &month, &day);
    const auto y = static_cast<unsigned>(year) % 10000;
    put2(text_, y / 100);
    put2(text_ + 2, y % 100);
    text_[4] = '-';
    put2(text_ + 5, month);
    text_[7] = '-';
    put2(text_ + 8, day);
    text_[10] = ' ';
    put2(text_ + 11, in_day / 3600);
    text_[13] = ':';
    put2(text_ + 14, in_day / 60 % 60);
    text_[16] = ':';
    put2(text_ + 17, in_day % 60);
    text_[19] = '.';
  }
  std::memcpy(at, text_, sizeof text_);
  const auto micros = static_cast<unsigned>(ns % 1'000'000'000 / 1000);
  put2(at + 20, micros / 10000);
  put2(at + 22, micros / 100 % 100);
  put2(at + 24, micros % 100);
  return at + kTextSize;
}

char* grow_by(fmt::memory_buffer& out, std::size_t bytes) {
  const std::size_t size = out.size();
  out.resize(size + bytes);
  return out.data() + size;
}

void append_prefix(fmt::memory_buffer& out, DateCache& date, std::uint64_t ns, const Site& site,
                   std::string_view context) {
  constexpr std::size_t kFixed =
      DateCache::kTextSize + 5 + 5 + 10;  // date, level, separators, line
  char* at = grow_by(out, kFixed + context.size() + site.file.size());
  at = date.write(at, ns);
  *at++ = ' ';
  std::memcpy(at, padded_name(site.level).data(), 5);
  at += 5;
  *at++ = ' ';
  std::memcpy(at, context.data(), context.size());
  at += context.size();
  *at++ = ' ';
  std::memcpy(at, site.file.data(), site.file.size());
  at += site.file.size();
  *at++ = ':';
  const fmt::format_int line(site.line);
  std::memcpy(at, line.data(), line.size());
  at += line.size();
  *at++ = ' ';
  out.resize(static_cast<std::size_t>(at - out.data()));
}

std::size_t utf8_cut(std::string_view text, std::size_t limit) noexcept {
  if (text.size() <= limit) return text.size();
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

void finish_line(fmt::memory_buffer& out, std::size_t start, bool truncated) {
  const std::size_t length = out.size() - start;
  if (length > kMaxMessageBytes) {
    const std::string_view message(out.data() + start, length);
    out.resize(start + utf8_cut(message, kMaxMessageBytes));
    truncated = true;
  }
  if (truncated)
    out.append(kTruncatedMarker.data(), kTruncatedMarker.data() + kTruncatedMarker.size());
  out.push_back('\n');
}

void format_message(Output& out, std::string_view format, fmt::format_args args) noexcept {
  const std::size_t start = out.buffer.size();
  try {
    fmt::vformat_to(fmt::appender(out.buffer), fmt::string_view(format.data(), format.size()),
                    args);
  } catch (const std::exception& e) {
    out.buffer.resize(start);
    fmt::format_to(fmt::appender(out.buffer), "[log format error: {}] {}", e.what(), format);
  }
}

namespace {

// Splits a format into literal text and plain "{}" fields; anything else (an index, a spec,
// an escaped brace, too many fields) leaves the site to fmt.
void parse_site(std::string_view format, SiteCache& cache) noexcept {
  cache.state = 2;
  if (format.size() > UINT16_MAX) return;
  std::size_t fields = 0;
  std::size_t literal_at = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '}') return;
    if (format[i] != '{') continue;
    if (i + 1 >= format.size() || format[i + 1] != '}' || fields == kMaxSimpleFields) return;
    cache.literal_at[fields] = static_cast<std::uint16_t>(literal_at);
    cache.literal_size[fields] = static_cast<std::uint16_t>(i - literal_at);
    ++fields;
    ++i;
    literal_at = i + 1;
  }
  cache.literal_at[fields] = static_cast<std::uint16_t>(literal_at);
  cache.literal_size[fields] = static_cast<std::uint16_t>(format.size() - literal_at);
  cache.fields = static_cast<std::uint8_t>(fields);
  cache.state = 1;
}

// Writes an argument that has a short bound on its length at `at`; nullptr for the others.
char* write_arg(char* at, const SimpleArg& arg) noexcept {
  switch (arg.kind) {
    case SimpleArg::Kind::i64: {
      const fmt::format_int text(arg.i64);
      std::memcpy(at, text.data(), text.size());
      return at + text.size();
    }
    case SimpleArg::Kind::u64: {
      const fmt::format_int text(arg.u64);
      std::memcpy(at, text.data(), text.size());
      return at + text.size();
    }
    case SimpleArg::Kind::boolean: {
      const std::string_view text = arg.boolean ? "true" : "false";
      std::memcpy(at, text.data(), text.size());
      return at + text.size();
    }
    case SimpleArg::Kind::character:
      *at = arg.character;
      return at + 1;
    case SimpleArg::Kind::text:
      std::memcpy(at, arg.text.data, arg.text.size);
      return at + arg.text.size;
    default:
      return nullptr;
  }
}

// The longest text write_arg() writes for arg (0: write_arg does not handle it).
std::size_t arg_bound(const SimpleArg& arg) noexcept {
  switch (arg.kind) {
    case SimpleArg::Kind::i64:
    case SimpleArg::Kind::u64:
      return 20;
    case SimpleArg::Kind::boolean:
      return 5;
    case SimpleArg::Kind::character:
      return 1;
    case SimpleArg::Kind::text:
      return arg.text.size;
    default:
      return 0;
  }
}

// Floating point and addresses, through fmt's "{}".
void append_other(fmt::memory_buffer& out, const SimpleArg& arg) {
  switch (arg.kind) {
    case SimpleArg::Kind::f32:
      fmt::format_to(fmt::appender(out), "{}", arg.f32);
      return;
    case SimpleArg::Kind::f64:
      fmt::format_to(fmt::appender(out), "{}", arg.f64);
      return;
    case SimpleArg::Kind::f80:
      fmt::format_to(fmt::appender(out), "{}", arg.f80);
      return;
    case SimpleArg::Kind::address:
      fmt::format_to(fmt::appender(out), "{}", arg.address);
      return;
    default:
      return;
  }
}

}  // namespace

bool format_simple(Output& out, const Site& site, const SimpleArg* args,
                   std::size_t count) noexcept {
  SiteCache* cache = site.cache;
  if (cache == nullptr) return false;
  if (cache->state == 0) parse_site(site.format, *cache);
  if (cache->state != 1 || cache->fields != count) return false;
  fmt::memory_buffer& buffer = out.buffer;
  const std::size_t start = buffer.size();
  try {
    std::size_t bound = 0;
    for (std::size_t i = 0; i <= count; ++i) bound += cache->literal_size[i];
    for (std::size_t i = 0; i < count; ++i) bound += arg_bound(args[i]);
    char* at = grow_by(buffer, bound);
    const char* format = site.format.data();
    for (std::size_t i = 0; i <= count; ++i) {
      std::memcpy(at, format + cache->literal_at[i], cache->literal_size[i]);
      at += cache->literal_size[i];
      if (i == count) break;
      if (char* end = write_arg(at, args[i])) {
        at = end;
        continue;
      }
      // A float or an address: fmt writes it at the end, then the rest moves back in place.
      const std::size_t written = static_cast<std::size_t>(at - buffer.data());
      buffer.resize(written);
      append_other(buffer, args[i]);
      std::size_t rest = 0;
      for (std::size_t j = i + 1; j <= count; ++j) rest += cache->literal_size[j];
      for (std::size_t j = i + 1; j < count; ++j) rest += arg_bound(args[j]);
      at = grow_by(buffer, rest);
    }
    buffer.resize(static_cast<std::size_t>(at - buffer.data()));
  } catch (...) {
    buffer.resize(start);
    return false;
  }
  return true;
}

}  // namespace tern::log::detail
