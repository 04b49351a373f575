// Out-of-line parts of tern::base: the error categories (tern::Errc, deadlines, codes with
// context) and the spin lock (fatal.cc: TERN_FATAL).
#include <sched.h>

#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "tern/base/result.h"
#include "tern/base/spin_lock.h"

namespace tern {

namespace {

class TernErrorCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern"; }
  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::closed:
        return "closed";
      case Errc::lagged:
        return "subscriber lagged behind and missed messages";
      case Errc::stopped:
        return "runtime stopped";
      case Errc::eof:
        return "unexpected end of stream";
    }
    return "unknown tern error";
  }
};

// A deadline that passed: its own text, std::errc::timed_out as its condition.
class DeadlineCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern.deadline"; }
  std::string message(int) const override { return "deadline exceeded"; }
  std::error_condition default_error_condition(int) const noexcept override {
    return std::errc::timed_out;
  }
};

// The category of a code with context: one object per (context, category) pair, never freed,
// since error_codes hold a pointer to their category. Everything but the text is the base's.
class ContextCategory final : public std::error_category {
 public:
  ContextCategory(std::string text, bool replaces, const std::error_category& base)
      : text_(std::move(text)), replaces_(replaces), base_(base) {}
  const char* name() const noexcept override { return base_.name(); }
  std::string message(int value) const override {
    if (replaces_) return text_;
    std::string message = text_;
    message.append(": ").append(base_.message(value));
    return message;
  }
  std::error_condition default_error_condition(int value) const noexcept override {
    return base_.default_error_condition(value);
  }
  bool equivalent(int value, const std::error_condition& condition) const noexcept override {
    return base_.equivalent(value, condition);
  }
  const std::error_category& base() const noexcept { return base_; }

 private:
  const std::string text_;
  const bool replaces_;
  const std::error_category& base_;
};

// Distinct contexts kept at most, and the longest text kept (longer ones are cut).
constexpr std::size_t kMaxContexts = 4096;
constexpr std::size_t kMaxContextBytes = 256;

std::error_code contextual(std::error_code code, std::string_view text, bool replaces) {
  if (!code || code.category() == error_category()) return code;
  text = text.substr(0, kMaxContextBytes);
  struct Registry {
    std::mutex mutex;
    std::map<std::tuple<const std::error_category*, bool, std::string>,
             std::unique_ptr<ContextCategory>>
        categories;
  };
  static Registry* registry = new Registry;  // never destroyed: codes may outlive statics
  std::lock_guard lock(registry->mutex);
  auto key = std::make_tuple(&code.category(), replaces, std::string(text));
  auto found = registry->categories.find(key);
  if (found == registry->categories.end()) {
    if (registry->categories.size() >= kMaxContexts) return code;
    auto category = std::make_unique<ContextCategory>(std::string(text), replaces, code.category());
    found = registry->categories.emplace(std::move(key), std::move(category)).first;
  }
  return {code.value(), *found->second};
}

}  // namespace

const std::error_category& error_category() noexcept {
  static const TernErrorCategory category;
  return category;
}

std::error_code deadline_exceeded() noexcept {
  static const DeadlineCategory category;
  return {ETIMEDOUT, category};
}

std::error_code with_context(std::error_code code, std::string_view context) {
  return contextual(code, context, false);
}

std::error_code with_explanation(std::error_code code, std::string_view explanation) {
  return contextual(code, explanation, true);
}

std::error_code without_context(std::error_code code) noexcept {
  while (const auto* context = dynamic_cast<const ContextCategory*>(&code.category()))
    code = {code.value(), context->base()};
  return code;
}

void SpinLock::lock_slow() noexcept {
  for (unsigned spins = 0;; ++spins) {
    while (locked_.load(std::memory_order_relaxed)) {
      if (spins++ < 128) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
      } else {
        ::sched_yield();  // the holder may have been preempted; let it run
      }
    }
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
  }
}

}  // namespace tern
