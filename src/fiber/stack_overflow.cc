#include "stack_overflow.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <string_view>

#include "scheduler.h"
#include "tern/base/assert.h"
#include "tern/log/log.h"

namespace tern::detail {

namespace {

constexpr std::size_t kAltStackSize = 64 * 1024;

struct sigaction previous_segv_action;

// Appends text to buf (async-signal-safe).
std::size_t append(char* buf, std::size_t at, std::size_t cap, const char* text) {
  while (*text != '\0' && at + 1 < cap) buf[at++] = *text++;
  return at;
}

std::size_t append_number(char* buf, std::size_t at, std::size_t cap, std::uint64_t value) {
  char digits[24];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (n > 0 && at + 1 < cap) buf[at++] = digits[--n];
  return at;
}

void on_segv(int signal, siginfo_t* info, void* context) {
  Scheduler* scheduler = Scheduler::current();
  if (scheduler != nullptr) {
    const FiberControl* fiber = scheduler->running();
    if (!fiber->is_main && fiber->stack.in_guard(info->si_addr)) {
      char message[256];
      std::size_t n = 0;
      n = append(message, n, sizeof message, "tern: stack overflow in fiber '");
      n = append(message, n, sizeof message, fiber->name);
      n = append(message, n, sizeof message, "' (id ");
      n = append_number(message, n, sizeof message, fiber->id);
      n = append(message, n, sizeof message, ", stack ");
      n = append_number(message, n, sizeof message, fiber->stack.size / 1024);
      n = append(message, n, sizeof message,
                 fiber->on_shared_stack
                     ? " KiB, the worker's shared stack); a shared-stack fiber must use less"
                     : " KiB); give it a larger FiberOptions::stack_size");
      // The signal-safe form of TERN_FATAL; then what this and other threads logged before the
      // overflow is written out.
      fatal_message(__FILE__, __LINE__, std::string_view(message, n), &tern::log::emergency_flush);
    }
  }
  // Not a fiber's guard page: hand the fault to whoever handled SIGSEGV before tern.
  if ((previous_segv_action.sa_flags & SA_SIGINFO) != 0 &&
      previous_segv_action.sa_sigaction != nullptr) {
    previous_segv_action.sa_sigaction(signal, info, context);
    return;
  }
  if (previous_segv_action.sa_handler != SIG_DFL && previous_segv_action.sa_handler != SIG_IGN &&
      previous_segv_action.sa_handler != nullptr) {
    previous_segv_action.sa_handler(signal);
    return;
  }
  // Default action: restore it and return, so the faulting instruction faults again.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGSEGV, &default_action, nullptr);
}

void install_segv_handler() {
  struct sigaction action = {};
  action.sa_sigaction = &on_segv;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGSEGV, &action, &previous_segv_action);
}

}  // namespace

AltSignalStack::AltSignalStack() {
  static std::once_flag once;
  std::call_once(once, install_segv_handler);
  stack_t current = {};
  if (::sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0 &&
      current.ss_size >= kAltStackSize / 2) {
    return;  // the thread already has one (a sanitizer's, or the application's)
  }
  memory_ =
      ::mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory_ == MAP_FAILED) {
    memory_ = nullptr;
    return;
  }
  size_ = kAltStackSize;
  stack_t stack = {};
  stack.ss_sp = memory_;
  stack.ss_size = size_;
  installed_ = ::sigaltstack(&stack, nullptr) == 0;
}

AltSignalStack::~AltSignalStack() {
  if (installed_) {
    stack_t disable = {};
    disable.ss_flags = SS_DISABLE;
    ::sigaltstack(&disable, nullptr);
  }
  if (memory_ != nullptr) ::munmap(memory_, size_);
}

}  // namespace tern::detail
