#pragma once

#include <chrono>
#include <cstddef>
#include <span>

#include "tern/base/result.h"
#include "tern/fiber/event.h"
#include "tern/net/buffer.h"
#include "transport.h"

namespace tern::rpc::detail {

// Starts the fibers of a FrameWriter that runs on demand (FrameWriter::run_on_demand).
class WriterStarter {
 public:
  // Starts a fiber that calls the writer's run() (which then returns once nothing is left to
  // send); false when no fiber could be started. Called from the worker's fibers.
  virtual bool start_writer() noexcept = 0;

 protected:
  ~WriterStarter() = default;
};

// The sending half of a connection: fibers append whole frames to buffer() and call wake(); one
// writer fiber runs run() and sends everything appended since its last write in one write, so
// replies finished in the same scheduling round share a system call. Fibers of one worker.
class alignas(64) FrameWriter {
 public:
  explicit FrameWriter(Transport& stream) : stream_(stream) {}

  // Instead of a writer fiber that waits for frames all along, `starter` starts one whenever
  // frames are left to send and none runs; it ends once they are sent. Call before any frame.
  void run_on_demand(WriterStarter& starter) noexcept {
    starter_ = &starter;
    idle_ = true;
  }

  // Where to append frames; call wake() afterwards.
  net::Buffer& buffer() noexcept {
    if (lent_) take_spare();
    return pending_;
  }
  void wake() noexcept {
    if (idle_) resume();
  }
  // Like wake(), but when `alone` (no other frame of this connection is expected this round, so
  // there is nothing to batch with) and the writer is idle, sends from the calling fiber and
  // leaves the writer only what the socket did not take.
  void flush(bool alone) noexcept;
  // Bytes appended and not yet written (with a TLS stream's ciphertext still unsent).
  std::size_t pending() const noexcept { return pending_.size() + in_write_ + stream_.unsent(); }

  // Above zero: a write that can send no byte for this long fails run() with
  // std::errc::timed_out (0: the stream's own timeout, if any).
  void set_write_timeout(std::chrono::milliseconds timeout) noexcept { write_timeout_ = timeout; }
  // Above zero: a buffer that held more than this for one write is freed afterwards, so a large
  // frame does not pin its memory (0: buffers keep their largest size).
  void set_retained_size(std::size_t bytes) noexcept { retained_size_ = bytes; }
  // An event set whenever a write completes (nullptr: none); for a fiber waiting for the
  // unsent bytes to go down.
  void set_progress_event(Event* event) noexcept { progress_ = event; }

  // The writer fiber's loop: returns once everything was written and stop() was called (on
  // demand: once everything was written), or at the first write error (the rest is dropped).
  tern::Result<void> run();
  // Lets run() return once the buffer is empty.
  void stop() noexcept {
    stopping_ = true;
    wakeup_.set();
  }
  bool failed() const noexcept { return failed_; }
  // After run() failed: the bytes that were still unsent (they are dropped).
  std::size_t unsent_at_failure() const noexcept { return unsent_at_failure_; }

 private:
  // Takes the worker's spare send buffer, if there is one, after giving ours up.
  void take_spare() noexcept;
  // Gives pending_ (empty) up after a send: to the worker's spare if that has none, else freed.
  void give_up_buffer() noexcept;
  // Sets the idle writer to work: wakes its fiber or, on demand, starts one.
  void resume() noexcept;
  // Writes all of bytes, failing when write_timeout_ passes with no byte sent.
  tern::Result<void> write_all(std::span<const std::byte> bytes);
  // Sends what the stream's try_send() left unsent (TLS records), within write_timeout_.
  tern::Result<void> flush_stream();
  // Whether nothing is left to send: no frame appended, no ciphertext held by the stream.
  bool drained() const noexcept { return pending_.empty() && stream_.unsent() == 0; }

  // What every call reads (the stream, the buffer it appends to, the flags) comes first, on one
  // cache line: with thousands of connections a connection's writer is rarely in cache.
  Transport& stream_;
  net::Buffer pending_;
  bool idle_ = false;
  bool stopping_ = false;
  bool failed_ = false;
  bool lent_ = false;  // pending_ was given up: the next append takes the worker's spare
  std::size_t in_write_ = 0;
  net::Buffer writing_;
  Event wakeup_;
  Event* progress_ = nullptr;
  std::chrono::milliseconds write_timeout_{0};
  std::size_t retained_size_ = 0;
  std::size_t unsent_at_failure_ = 0;
  WriterStarter* starter_ = nullptr;  // set when the writer runs on demand
};

}  // namespace tern::rpc::detail
