// SpareCpuCheck: /proc/loadavg's runnable-thread count against the online CPUs.
#include "spare_cpu.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>

#include "tern/base/detail/sys_calls.h"

namespace tern::detail {

std::optional<int> runnable_threads_in_loadavg(std::string_view text) noexcept {
  // Fields: three load averages, "runnable/total", the last pid.
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::size_t space = text.rfind(' ', slash);
  if (space == std::string_view::npos || space + 1 == slash) return std::nullopt;
  int runnable = 0;
  const char* first = text.data() + space + 1;
  const char* last = text.data() + slash;
  const auto [end, error] = std::from_chars(first, last, runnable);
  if (error != std::errc() || end != last || runnable < 0) return std::nullopt;
  return runnable;
}

SpareCpuCheck::~SpareCpuCheck() {
  if (fd_ >= 0) tern::detail::sys.close(fd_);
}

bool SpareCpuCheck::spare(Clock::time_point now) noexcept {
  if (unreadable_) return true;
  if (now - checked_at_ >= kRecheck) {
    checked_at_ = now;
    busy_readings_ = read_busy() ? busy_readings_ + 1 : 0;
  }
  return busy_readings_ < 2;
}

bool SpareCpuCheck::read_busy() noexcept {
  if (fd_ < 0) {
    fd_ = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    cpus_ = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    if (fd_ < 0 || cpus_ <= 0) {
      unreadable_ = true;
      return false;
    }
  }
  char text[128];
  const ssize_t n = ::pread(fd_, text, sizeof text, 0);  // procfs makes the text anew each read
  const std::optional<int> runnable =
      n > 0 ? runnable_threads_in_loadavg(std::string_view(text, static_cast<std::size_t>(n)))
            : std::nullopt;
  if (!runnable) {
    unreadable_ = true;
    return false;
  }
  return *runnable > cpus_;
}

}  // namespace tern::detail
