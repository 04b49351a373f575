// Counts the pthread mutexes each thread holds, by interposing pthread_mutex_lock, _trylock,
// _timedlock and _unlock (as brpc does), so that a fiber that waits while holding a std::mutex
// is caught in debug builds instead of deadlocking its worker. Built only with
// TERN_MUTEX_CHECK (Debug builds without sanitizers).
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>

#include "debug_checks.h"
#include "tern/base/assert.h"

namespace {

using LockFn = int (*)(pthread_mutex_t*);
using TimedLockFn = int (*)(pthread_mutex_t*, const struct timespec*);

thread_local int held_count = 0;

template <typename Fn>
Fn next_symbol(const char* name) {
  void* symbol = ::dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    TERN_FATAL("cannot find {} for the mutex check", name);
  }
  return reinterpret_cast<Fn>(symbol);
}

LockFn real_lock() {
  static const LockFn fn = next_symbol<LockFn>("pthread_mutex_lock");
  return fn;
}
LockFn real_trylock() {
  static const LockFn fn = next_symbol<LockFn>("pthread_mutex_trylock");
  return fn;
}
LockFn real_unlock() {
  static const LockFn fn = next_symbol<LockFn>("pthread_mutex_unlock");
  return fn;
}
TimedLockFn real_timedlock() {
  static const TimedLockFn fn = next_symbol<TimedLockFn>("pthread_mutex_timedlock");
  return fn;
}

}  // namespace

namespace tern::detail {
int std_mutexes_held() noexcept { return held_count; }
}  // namespace tern::detail

extern "C" {

int pthread_mutex_lock(pthread_mutex_t* mutex) {
  const int rc = real_lock()(mutex);
  if (rc == 0) ++held_count;
  return rc;
}

int pthread_mutex_trylock(pthread_mutex_t* mutex) {
  const int rc = real_trylock()(mutex);
  if (rc == 0) ++held_count;
  return rc;
}

int pthread_mutex_timedlock(pthread_mutex_t* mutex, const struct timespec* deadline) {
  const int rc = real_timedlock()(mutex, deadline);
  if (rc == 0) ++held_count;
  return rc;
}

int pthread_mutex_unlock(pthread_mutex_t* mutex) {
  const int rc = real_unlock()(mutex);
  if (rc == 0 && held_count > 0) --held_count;
  return rc;
}

}  // extern "C"
