// The fatal-error path: TERN_FATAL, TERN_ASSERT and the stack-overflow handler end here.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <fmt/format.h>  // fmt's definitions too, not only core.h's declarations: clang 19 names
                         // the instantiations libfmt.so exports differently, so they are made here

#include "tern/base/assert.h"
#include "tern/base/detail/sys_calls.h"

namespace tern {

namespace {

// A fatal line longer than this is cut (the location and context are kept).
constexpr std::size_t kMessageBytes = 1024;
constexpr std::size_t kContextBytes = 128;
constexpr std::size_t kLineBytes = kMessageBytes + kContextBytes + 512;

constinit std::atomic<FatalContextProvider> context_provider{nullptr};

// Appends text to a fixed buffer (async-signal-safe).
class LineBuilder {
 public:
  void add(std::string_view text) noexcept {
    const std::size_t n = std::min(text.size(), sizeof data_ - size_);
    std::memcpy(data_ + size_, text.data(), n);
    size_ += n;
  }
  void add_number(long value) noexcept {
    char digits[24];
    std::size_t n = 0;
    unsigned long magnitude =
        value < 0 ? 0ul - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
    do {
      digits[n++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) add("-");
    while (n > 0) add(std::string_view(&digits[--n], 1));
  }
  // Makes sure the line ends with a newline, cutting its end if the buffer is full.
  void end_line() noexcept {
    if (size_ == sizeof data_) --size_;
    data_[size_++] = '\n';
  }
  // Writes the line to stderr, retrying partial writes (async-signal-safe).
  void write_out() const noexcept {
    std::size_t at = 0;
    while (at < size_) {
      const ssize_t n = tern::detail::sys.write(STDERR_FILENO, data_ + at, size_ - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      at += static_cast<std::size_t>(n);
    }
  }

 private:
  char data_[kLineBytes];
  std::size_t size_ = 0;
};

// The path of `file` from the last src/, include/, tests/, tools/, bench/ or examples/ directory
// on, so that messages name "src/fiber/scheduler.cc" rather than the build machine's tree.
std::string_view relative_path(const char* file) noexcept {
  if (file == nullptr) return "?";
  const std::string_view path(file);
  std::size_t best = std::string_view::npos;
  for (std::string_view marker :
       {"/src/", "/include/", "/tests/", "/tools/", "/bench/", "/examples/"}) {
    const std::size_t at = path.rfind(marker);
    if (at != std::string_view::npos && (best == std::string_view::npos || at > best)) best = at;
  }
  return best == std::string_view::npos ? path : path.substr(best + 1);
}

[[noreturn]] void print_and_abort(LineBuilder& line, const char* file, int line_number,
                                  void (*before_abort)() noexcept) noexcept {
  line.add(" (");
  line.add(relative_path(file));
  line.add(":");
  line.add_number(line_number);
  if (FatalContextProvider provider = context_provider.load(std::memory_order_acquire)) {
    char context[kContextBytes];
    const std::size_t n = provider(context, sizeof context);
    if (n > 0) {
      line.add(", ");
      line.add(std::string_view(context, std::min(n, sizeof context)));
    }
  }
  line.add(")");
  line.end_line();
  line.write_out();
  if (before_abort != nullptr) before_abort();
  std::abort();
}

// A message that starts with "tern: " already (older call sites wrote it) is not prefixed twice.
std::string_view without_prefix(std::string_view message) noexcept {
  constexpr std::string_view kPrefix = "tern: ";
  return message.starts_with(kPrefix) ? message.substr(kPrefix.size()) : message;
}

}  // namespace

void set_fatal_context_provider(FatalContextProvider provider) noexcept {
  context_provider.store(provider, std::memory_order_release);
}

namespace detail {

void fatal_formatted(const char* file, int line, fmt::string_view format,
                     fmt::format_args args) noexcept {
  char message[kMessageBytes];
  std::size_t size = 0;
  try {
    const auto result = fmt::vformat_to_n(message, sizeof message, format, args);
    size = std::min(result.size, sizeof message);
  } catch (const std::exception& e) {
    const auto result = fmt::format_to_n(message, sizeof message, "[format error: {}] {}", e.what(),
                                         std::string_view(format.data(), format.size()));
    size = std::min(result.size, sizeof message);
  } catch (...) {
    size = std::min(format.size(), sizeof message);
    std::memcpy(message, format.data(), size);
  }
  LineBuilder builder;
  builder.add("tern: ");
  builder.add(without_prefix(std::string_view(message, size)));
  print_and_abort(builder, file, line, nullptr);
}

void fatal_message(const char* file, int line, std::string_view message,
                   void (*before_abort)() noexcept) noexcept {
  LineBuilder builder;
  builder.add("tern: ");
  builder.add(without_prefix(message));
  print_and_abort(builder, file, line, before_abort);
}

void assert_fail(const char* expr, const char* message, const char* file, int line) noexcept {
  LineBuilder builder;
  builder.add("tern: ");
  builder.add(without_prefix(message != nullptr ? message : "assertion failed"));
  builder.add(" [failed: ");
  builder.add(expr != nullptr ? expr : "?");
  builder.add("]");
  print_and_abort(builder, file, line, nullptr);
}

}  // namespace detail

}  // namespace tern
