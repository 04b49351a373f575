#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tern/base/result.h"

namespace tern::log {

// Where formatted lines go. The logger calls a sink from one thread at a time: the background
// writer, or (synchronous mode) the logging thread under the logger's lock; a sink must not log.
class Sink {
 public:
  virtual ~Sink();
  // Writes whole lines (every chunk ends with '\n'). Called by the logger only.
  virtual void write(std::string_view lines) = 0;
  // Writes whole lines unless that would wait (for a full pipe, say): false, nothing written.
  // The logger uses it for peer lines (tern/log/peer_log.h) in synchronous mode. The default
  // calls write(); a sink whose write can wait overrides it. Called by the logger only.
  virtual bool try_write(std::string_view lines) {
    write(lines);
    return true;
  }
  // Hands buffered bytes to the operating system. Called by the logger only (shutdown, flush()).
  virtual void flush() {}
};

// Writes lines to a file descriptor, standard error (2) by default; the descriptor is not owned.
class StderrSink final : public Sink {
 public:
  // Any thread.
  explicit StderrSink(int fd = 2) noexcept : fd_(fd) {}
  void write(std::string_view lines) override;
  // Writes only if the descriptor can take the bytes now (a socket: MSG_DONTWAIT; anything else:
  // poll() says writable, and at most PIPE_BUF bytes, which a writable pipe takes whole).
  bool try_write(std::string_view lines) override;

 private:
  int fd_;
};

// How a FileSink names, rotates and keeps its files.
struct FileSinkOptions {
  std::string path;             // the file written now; empty: no file sink
  std::uint64_t max_bytes = 0;  // rotate before the file would grow past this (0: no limit)
  bool daily = false;           // rotate when the UTC day changes
  std::size_t backups = 5;      // rotated files kept: path.1 (newest) .. path.N; older dropped
  // Every this many bytes written, the sink starts their writeback to disk and asks the kernel
  // to drop, once clean, what lies more than two windows back from the page cache; 0 leaves
  // the page cache to the kernel.
  std::size_t writeback_window = 8u << 20;
  // The clock the daily rotation reads (tests inject one); empty: std::chrono::system_clock.
  std::function<std::chrono::system_clock::time_point()> clock{};
};

// Appends lines to a file, rotating it by size and/or by day: path becomes path.1, path.1
// becomes path.2 and so on up to path.N, whose old contents are dropped. A line is never split
// across two files. Lines go straight to write(2): the logger batches them already. Written
// data goes to disk a window at a time (FileSinkOptions::writeback_window) instead of piling up
// as dirty pages, and the file's older pages leave the page cache once they are on disk.
class FileSink final : public Sink {
 public:
  // Opens (creating or appending to) options.path. Any thread.
  [[nodiscard]] static Result<std::shared_ptr<FileSink>> open(FileSinkOptions options);
  ~FileSink() override;

  void write(std::string_view lines) override;
  // Failed writes and reopens since the sink was opened (the logger cannot log them). Any
  // thread.
  std::uint64_t errors() const noexcept { return errors_.load(std::memory_order_relaxed); }

  // Use open().
  FileSink(FileSinkOptions options, int fd, std::uint64_t size);

 private:
  std::int64_t today() const;
  void rotate();
  void write_all(std::string_view bytes);
  void start_writeback() noexcept;
  void count_error() noexcept { errors_.fetch_add(1, std::memory_order_relaxed); }

  FileSinkOptions options_;
  std::vector<std::string> names_;  // path, path.1 .. path.N, built once (rotation allocates none)
  int fd_;
  std::uint64_t size_;
  std::uint64_t writeback_from_;  // where the next writeback starts (bytes before it are started)
  std::uint64_t drop_from_;       // where the next drop from the page cache starts
  std::int64_t day_;
  std::atomic<std::uint64_t> errors_{0};
};

}  // namespace tern::log
