// The offload pool: threads that run blocking work for fibers and wake them when it is done.
#include "tern/io/offload.h"
#include "tern/base/signal_mask.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "tern/fiber/detail/parked_node.h"
#include "tern/fiber/detail/waiter.h"

namespace tern::io {

namespace {

// One piece of work; lives on the waiting fiber's stack.
struct Job {
  std::move_only_function<void()> run;
  tern::detail::Waiter waiter;
};

std::atomic<std::size_t> thread_limit{
    std::max<std::size_t>(4, std::thread::hardware_concurrency())};

// Starts a thread whenever work arrives and every started thread is busy, up to the limit.
class Pool {
 public:
  void submit(Job* job) {
    std::unique_lock lock(mutex_);
    queue_.push_back(job);
    if (idle_ == 0 && started_ < thread_limit.load(std::memory_order_relaxed)) {
      ++started_;
      const ProcessSignalsBlocked blocked;  // the new thread inherits the mask
      std::thread([this] { serve(); }).detach();
    } else {
      ready_.notify_one();
    }
  }

 private:
  void serve() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      ready_.wait(lock, [this] { return !queue_.empty(); });
      --idle_;
      Job* job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      job->run();
      if (tern::detail::claim(job->waiter)) tern::detail::wake(job->waiter);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job*> queue_;
  std::size_t idle_ = 0;
  std::size_t started_ = 0;
};

Pool& pool() {
  static Pool* instance = new Pool;  // never destroyed: its threads live until the process exits
  return *instance;
}

}  // namespace

namespace detail {

void offload_erased(std::move_only_function<void()> work) {
  const tern::detail::ParkedNode<Job> node(tern::detail::parks_off_stack());
  Job& job = *node;
  job.run = std::move(work);
  job.waiter.fiber = tern::detail::current_fiber("tern::io::offload");
  tern::detail::begin_wait(job.waiter.fiber);
  pool().submit(&job);
  tern::detail::wait(job.waiter.fiber, kNoDeadline, false);
}

}  // namespace detail

void set_offload_threads(std::size_t count) noexcept {
  thread_limit.store(count > 0 ? count : 1, std::memory_order_relaxed);
}

}  // namespace tern::io
