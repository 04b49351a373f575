// The sinks: a file descriptor (stderr) and a rotating file.
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "tern/base/detail/sys_calls.h"
#include "tern/log/sink.h"

namespace tern::log {

namespace {

constexpr std::int64_t kSecondsPerDay = 86400;

// Writes every byte unless the descriptor fails. False on failure.
bool write_fully(int fd, std::string_view bytes) noexcept {
  while (!bytes.empty()) {
    const ssize_t n = tern::detail::sys.write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

int open_for_append(const std::string& path) noexcept {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

std::int64_t day_of(std::chrono::system_clock::time_point when) noexcept {
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count();
  return seconds >= 0 ? seconds / kSecondsPerDay : (seconds - kSecondsPerDay + 1) / kSecondsPerDay;
}

}  // namespace

Sink::~Sink() = default;

void StderrSink::write(std::string_view lines) { write_fully(fd_, lines); }

bool StderrSink::try_write(std::string_view lines) {
  const ssize_t sent =
      tern::detail::sys.send(fd_, lines.data(), lines.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent >= 0) {
    if (static_cast<std::size_t>(sent) < lines.size())
      write_fully(fd_, lines.substr(static_cast<std::size_t>(sent)));  // the socket took some
    return true;
  }
  if (errno != ENOTSOCK) return false;
  pollfd ready{.fd = fd_, .events = POLLOUT, .revents = 0};
  if (tern::detail::sys.poll(&ready, 1, 0) != 1 || (ready.revents & POLLOUT) == 0) return false;
  if (lines.size() > PIPE_BUF) {
    // A longer write could wait for a second pipe buffer: keep the first PIPE_BUF bytes, as a line.
    lines = lines.substr(0, PIPE_BUF - 1);
    return write_fully(fd_, lines) && write_fully(fd_, "\n");
  }
  return write_fully(fd_, lines);
}

Result<std::shared_ptr<FileSink>> FileSink::open(FileSinkOptions options) {
  if (options.path.empty()) return fail(std::errc::invalid_argument);
  const int fd = open_for_append(options.path);
  if (fd < 0) return fail(std::error_code(errno, std::generic_category()));
  struct stat status = {};
  const std::uint64_t size =
      ::fstat(fd, &status) == 0 ? static_cast<std::uint64_t>(status.st_size) : 0;
  return std::make_shared<FileSink>(std::move(options), fd, size);
}

FileSink::FileSink(FileSinkOptions options, int fd, std::uint64_t size)
    : options_(std::move(options)), fd_(fd), size_(size), writeback_from_(size), drop_from_(size) {
  if (!options_.clock) options_.clock = [] { return std::chrono::system_clock::now(); };
  names_.push_back(options_.path);
  for (std::size_t i = 1; i <= options_.backups; ++i)
    names_.push_back(options_.path + "." + std::to_string(i));
  day_ = today();
}

FileSink::~FileSink() {
  if (fd_ >= 0) tern::detail::sys.close(fd_);
}

std::int64_t FileSink::today() const { return day_of(options_.clock()); }

void FileSink::rotate() {
  if (fd_ >= 0) tern::detail::sys.close(fd_);
  if (options_.backups == 0) {
    ::unlink(names_[0].c_str());
  } else {
    for (std::size_t i = options_.backups; i >= 1; --i)
      ::rename(names_[i - 1].c_str(), names_[i].c_str());  // a missing file is fine
  }
  fd_ = open_for_append(names_[0]);
  if (fd_ < 0) count_error();
  size_ = 0;
  writeback_from_ = 0;
  drop_from_ = 0;
}

void FileSink::write_all(std::string_view bytes) {
  if (bytes.empty()) return;
  if (fd_ < 0) {
    fd_ = open_for_append(names_[0]);
    if (fd_ < 0) {
      count_error();
      return;
    }
  }
  if (!write_fully(fd_, bytes)) count_error();
  size_ += bytes.size();
  const std::size_t window = options_.writeback_window;
  if (window != 0 && size_ - writeback_from_ >= window) start_writeback();
}

void FileSink::start_writeback() noexcept {
  // Both calls are hints that never wait for the disk: pages still dirty or under writeback
  // stay cached, so a burst larger than the disk's speed is absorbed as before.
  const std::size_t window = options_.writeback_window;
  if (::sync_file_range(fd_, static_cast<off_t>(writeback_from_),
                        static_cast<off_t>(size_ - writeback_from_), SYNC_FILE_RANGE_WRITE) != 0) {
    options_.writeback_window = 0;  // not a regular file (a pipe, a device): nothing to manage
    return;
  }
  writeback_from_ = size_;
  if (writeback_from_ < 2 * window) return;
  const std::uint64_t drop_to = writeback_from_ - 2 * window;
  if (drop_to > drop_from_) {
    (void)::posix_fadvise(fd_, static_cast<off_t>(drop_from_),
                          static_cast<off_t>(drop_to - drop_from_), POSIX_FADV_DONTNEED);
    drop_from_ = drop_to;
  }
}

void FileSink::write(std::string_view lines) {
  if (options_.daily) {
    const std::int64_t day = today();
    if (day != day_) {
      day_ = day;
      if (size_ > 0) rotate();
    }
  }
  const std::uint64_t max = options_.max_bytes;
  while (max != 0 && size_ + lines.size() > max) {
    // Whole lines that still fit; a line longer than the limit gets a file of its own.
    const std::size_t room = size_ < max ? static_cast<std::size_t>(max - size_) : 0;
    const std::size_t last = room == 0 ? std::string_view::npos : lines.rfind('\n', room - 1);
    if (last != std::string_view::npos) {
      write_all(lines.substr(0, last + 1));
      lines.remove_prefix(last + 1);
    } else if (size_ == 0) {
      const std::size_t end = lines.find('\n');
      const std::size_t take = end == std::string_view::npos ? lines.size() : end + 1;
      write_all(lines.substr(0, take));
      lines.remove_prefix(take);
    }
    if (lines.empty()) return;
    rotate();
  }
  write_all(lines);
}

}  // namespace tern::log
