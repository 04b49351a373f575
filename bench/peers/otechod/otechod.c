// otechod: the raw epoll echo server of report 000 (its `otEchod`; docs/benchmark-methods.md), the
// baseline a hand-written event loop sets: one thread, one epoll set, non-blocking sockets, one
// read buffer of --buf bytes shared by every connection.
//
//   otechod [--host 127.0.0.1] [--port 0] [--buf 8192] [--threads 1] [--duration 0]
//
// Level-triggered: each readiness event reads up to --buf bytes and writes them straight back,
// reading again only while reads fill the buffer (a short read means the socket is drained, so
// no read is spent on EAGAIN), at most kMaxReads times before the other sockets get their turn.
// A write that would block keeps the unsent bytes with the connection and switches it from
// EPOLLIN to EPOLLOUT until they are gone: nothing is dropped, nothing spins, and a client that
// does not read stops being read from. --threads N runs N such loops, each on its own thread
// with its own SO_REUSEPORT listener on the same port (the kernel spreads the connections).
// Prints "otechod: listening on HOST:PORT (...)" once it accepts; stops on SIGINT/SIGTERM or
// after --duration seconds, exit status 0.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum {
  kMaxEvents = 256,
  kMaxReads = 16,    // full-buffer reads per readiness event before moving on
  kMaxAccepts = 64,  // accepts per readiness event of the listener
};

enum Kind { kConnection, kListener, kSignal, kTimer, kStop };

// One socket of a loop. Connections sit in their loop's list so a stop can close them.
struct Conn {
  enum Kind kind;
  int fd;
  char* pending;       // unsent bytes (capacity: the loop's buffer size), allocated on first use
  size_t pending_off;  // first unsent byte
  size_t pending_len;  // unsent bytes from pending_off
  struct Conn* prev;
  struct Conn* next;
};

struct Loop {
  int epfd;
  int reserve_fd;  // an idle descriptor given up to shed a connection when out of descriptors
  char* buf;
  size_t buf_size;
  struct Conn listener;
  struct Conn signal;  // loop 0 only
  struct Conn timer;   // loop 0 only, with --duration
  struct Conn stop;    // shared eventfd: readable once the server stops
  struct Conn conns;   // list head
  int stop_fd;
  pthread_t thread;
};

struct Config {
  const char* host;
  unsigned port;
  size_t buf;
  unsigned threads;
  double duration;
};

static void die(const char* what) {
  fprintf(stderr, "otechod: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void watch(struct Loop* loop, struct Conn* conn, uint32_t events) {
  struct epoll_event event = {.events = events, .data.ptr = conn};
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, conn->fd, &event) != 0) die("epoll_ctl(ADD)");
}

static bool rewatch(struct Loop* loop, struct Conn* conn, uint32_t events) {
  struct epoll_event event = {.events = events, .data.ptr = conn};
  return epoll_ctl(loop->epfd, EPOLL_CTL_MOD, conn->fd, &event) == 0;
}

static void close_conn(struct Conn* conn) {
  close(conn->fd);  // also removes it from the epoll set
  conn->prev->next = conn->next;
  conn->next->prev = conn->prev;
  free(conn->pending);
  free(conn);
}

// Sends what of bytes[0, len) the socket buffer takes in one send: returns that count (0 when
// full; a short count means it filled up, so no second send is spent on EAGAIN), or -1 on an
// error.
static ssize_t send_some(int fd, const char* bytes, size_t len) {
  for (;;) {
    ssize_t n = send(fd, bytes, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

// Keeps bytes[sent, len) for later and waits for EPOLLOUT instead of EPOLLIN.
static bool defer_rest(struct Loop* loop, struct Conn* conn, const char* bytes, size_t len,
                       size_t sent) {
  if (conn->pending == NULL) {
    conn->pending = malloc(loop->buf_size);
    if (conn->pending == NULL) return false;
  }
  conn->pending_off = 0;
  conn->pending_len = len - sent;
  memcpy(conn->pending, bytes + sent, conn->pending_len);
  return rewatch(loop, conn, EPOLLOUT);
}

// EPOLLIN (or an error or hang-up, which the read reports): echoes what the socket holds.
// Closes the connection on the end of the stream or an error.
static void on_readable(struct Loop* loop, struct Conn* conn) {
  int reads = 0;
  while (reads < kMaxReads) {
    ssize_t n = recv(conn->fd, loop->buf, loop->buf_size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) break;  // the peer closed (0) or reset the connection
    ++reads;
    ssize_t sent = send_some(conn->fd, loop->buf, (size_t)n);
    if (sent < 0) break;
    if (sent < n) {
      if (!defer_rest(loop, conn, loop->buf, (size_t)n, (size_t)sent)) break;
      return;
    }
    if ((size_t)n < loop->buf_size) return;
  }
  // Still readable after kMaxReads full buffers: level-triggered epoll reports it again.
  if (reads == kMaxReads) return;
  close_conn(conn);
}

// EPOLLOUT: sends the kept bytes; once they are gone, reads again.
static void on_writable(struct Loop* loop, struct Conn* conn) {
  ssize_t sent = send_some(conn->fd, conn->pending + conn->pending_off, conn->pending_len);
  if (sent < 0) {
    close_conn(conn);
    return;
  }
  conn->pending_off += (size_t)sent;
  conn->pending_len -= (size_t)sent;
  if (conn->pending_len == 0 && !rewatch(loop, conn, EPOLLIN)) close_conn(conn);
}

static void on_event(struct Loop* loop, struct Conn* conn, uint32_t events) {
  if (conn->pending_len > 0) {
    on_writable(loop, conn);  // EPOLLOUT, or EPOLLERR/EPOLLHUP which the send reports
  } else if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    on_readable(loop, conn);
  }
}

static void add_conn(struct Loop* loop, int fd) {
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  struct Conn* conn = calloc(1, sizeof *conn);
  if (conn == NULL) {
    close(fd);
    return;
  }
  conn->kind = kConnection;
  conn->fd = fd;
  conn->next = loop->conns.next;
  conn->prev = &loop->conns;
  conn->next->prev = conn;
  loop->conns.next = conn;
  watch(loop, conn, EPOLLIN);
}

// EPOLLIN on the listener: accepts what is queued. Out of descriptors, it gives up its reserve
// descriptor to accept and close one connection, so the queue does not keep the listener ready.
static void on_accept(struct Loop* loop) {
  for (int i = 0; i < kMaxAccepts; ++i) {
    int fd = accept4(loop->listener.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      add_conn(loop, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if ((errno == EMFILE || errno == ENFILE) && loop->reserve_fd >= 0) {
      close(loop->reserve_fd);
      fd = accept(loop->listener.fd, NULL, NULL);
      if (fd >= 0) close(fd);
      loop->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      continue;
    }
    return;  // EAGAIN: the queue is empty (or an error the next event retries)
  }
}

static void* run_loop(void* arg) {
  struct Loop* loop = arg;
  struct epoll_event events[kMaxEvents];
  for (;;) {
    int n = epoll_wait(loop->epfd, events, kMaxEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; ++i) {
      struct Conn* conn = events[i].data.ptr;
      switch (conn->kind) {
        case kConnection:
          on_event(loop, conn, events[i].events);
          break;
        case kListener:
          on_accept(loop);
          break;
        case kSignal:
        case kTimer: {
          const uint64_t one = 1;
          if (write(loop->stop_fd, &one, sizeof one) != sizeof one) die("write(eventfd)");
          return NULL;
        }
        case kStop:
          return NULL;
      }
    }
  }
}

// Closes every connection and descriptor of a loop that has returned.
static void close_loop(struct Loop* loop) {
  while (loop->conns.next != &loop->conns) close_conn(loop->conns.next);
  close(loop->listener.fd);
  if (loop->signal.fd >= 0) close(loop->signal.fd);
  if (loop->timer.fd >= 0) close(loop->timer.fd);
  if (loop->reserve_fd >= 0) close(loop->reserve_fd);
  close(loop->epfd);
  free(loop->buf);
}

// A non-blocking listener on addr, with SO_REUSEPORT when several loops share the port.
static int make_listener(const struct sockaddr_storage* addr, socklen_t len, bool reuse_port) {
  int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  const int on = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) die("SO_REUSEADDR");
  if (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
    die("SO_REUSEPORT");
  if (bind(fd, (const struct sockaddr*)addr, len) != 0) die("bind");
  if (listen(fd, SOMAXCONN) != 0) die("listen");
  return fd;
}

static void usage(FILE* out) {
  fputs(
      "otechod: a raw epoll echo server (the otEchod of report 000): non-blocking sockets,\n"
      "level-triggered epoll, one loop per thread. Prints 'otechod: listening on HOST:PORT'\n"
      "when ready; stops on SIGINT/SIGTERM or after --duration seconds.\n"
      "\n"
      "Options:\n"
      "  --host ADDR       IPv4/IPv6 address to listen on (default 127.0.0.1)\n"
      "  -p, --port N      TCP port (default 0: the kernel picks; printed at start)\n"
      "  -b, --buf BYTES   read buffer of each loop (default 8192)\n"
      "  -t, --threads N   event loops, a thread and a SO_REUSEPORT listener each (default 1)\n"
      "  --duration SECS   stop after this many seconds (default 0: on a signal)\n"
      "  -h, --help        print this help\n",
      out);
}

static bool parse_number(const char* text, double* value) {
  char* end = NULL;
  errno = 0;
  *value = strtod(text, &end);
  return errno == 0 && end != text && *end == '\0' && *value >= 0;
}

static void parse_args(int argc, char** argv, struct Config* config) {
  static const struct option options[] = {
      {"host", required_argument, NULL, 'H'},
      {"port", required_argument, NULL, 'p'},
      {"buf", required_argument, NULL, 'b'},
      {"threads", required_argument, NULL, 't'},
      {"duration", required_argument, NULL, 'd'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "p:b:t:h", options, NULL)) != -1) {
    double value = 0;
    if (c == 'h') {
      usage(stdout);
      exit(0);
    }
    if (c == 'H') {
      config->host = optarg;
      continue;
    }
    if (c == '?' || !parse_number(optarg, &value)) {
      if (c != '?') fprintf(stderr, "otechod: bad value '%s'\n", optarg);
      usage(stderr);
      exit(2);
    }
    switch (c) {
      case 'p':
        config->port = (unsigned)value;
        break;
      case 'b':
        config->buf = (size_t)value;
        break;
      case 't':
        config->threads = (unsigned)value;
        break;
      case 'd':
        config->duration = value;
        break;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "otechod: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    exit(2);
  }
  if (config->port > 65535) {
    fprintf(stderr, "otechod: --port %u: out of range\n", config->port);
    exit(2);
  }
  if (config->buf == 0) config->buf = 1;
  if (config->threads == 0) config->threads = 1;
}

static void raise_fd_limit(void) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int main(int argc, char** argv) {
  struct Config config = {.host = "127.0.0.1", .port = 0, .buf = 8192, .threads = 1};
  parse_args(argc, argv, &config);

  struct sockaddr_storage addr;
  memset(&addr, 0, sizeof addr);
  socklen_t addr_len;
  struct sockaddr_in* v4 = (struct sockaddr_in*)&addr;
  struct sockaddr_in6* v6 = (struct sockaddr_in6*)&addr;
  if (inet_pton(AF_INET, config.host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)config.port);
    addr_len = sizeof *v4;
  } else if (inet_pton(AF_INET6, config.host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)config.port);
    addr_len = sizeof *v6;
  } else {
    fprintf(stderr, "otechod: --host %s: not an IP address\n", config.host);
    return 2;
  }

  raise_fd_limit();
  // Blocked in every thread (the loops inherit the mask): the signals arrive on a signalfd.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, NULL) != 0) die("pthread_sigmask");
  signal(SIGPIPE, SIG_IGN);

  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) die("eventfd");
  struct Loop* loops = calloc(config.threads, sizeof *loops);
  if (loops == NULL) die("calloc");
  const bool reuse_port = config.threads > 1;
  for (unsigned i = 0; i < config.threads; ++i) {
    struct Loop* loop = &loops[i];
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) die("epoll_create1");
    loop->buf_size = config.buf;
    loop->buf = malloc(config.buf);
    if (loop->buf == NULL) die("malloc");
    loop->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    loop->conns.next = loop->conns.prev = &loop->conns;
    loop->stop_fd = stop_fd;
    loop->signal.fd = loop->timer.fd = -1;

    loop->listener = (struct Conn){.kind = kListener};
    loop->listener.fd = make_listener(&addr, addr_len, reuse_port);
    // The loops after the first share the port the kernel gave the first.
    if (getsockname(loop->listener.fd, (struct sockaddr*)&addr, &addr_len) != 0) die("getsockname");
    watch(loop, &loop->listener, EPOLLIN);
    loop->stop = (struct Conn){.kind = kStop, .fd = stop_fd};
    watch(loop, &loop->stop, EPOLLIN);
  }

  struct Loop* first = &loops[0];
  first->signal = (struct Conn){.kind = kSignal};
  first->signal.fd = signalfd(-1, &stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
  if (first->signal.fd < 0) die("signalfd");
  watch(first, &first->signal, EPOLLIN);
  if (config.duration > 0) {
    first->timer = (struct Conn){.kind = kTimer};
    first->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (first->timer.fd < 0) die("timerfd_create");
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)config.duration;
    spec.it_value.tv_nsec = (long)((config.duration - (double)spec.it_value.tv_sec) * 1e9);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    if (timerfd_settime(first->timer.fd, 0, &spec, NULL) != 0) die("timerfd_settime");
    watch(first, &first->timer, EPOLLIN);
  }

  char host[INET6_ADDRSTRLEN];
  const void* ip =
      addr.ss_family == AF_INET ? (const void*)&v4->sin_addr : (const void*)&v6->sin6_addr;
  if (inet_ntop(addr.ss_family, ip, host, sizeof host) == NULL) die("inet_ntop");
  const unsigned port = ntohs(addr.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
  printf("otechod: listening on %s:%u (%u thread%s, buf %zu, epoll level-triggered)\n", host, port,
         config.threads, config.threads == 1 ? "" : "s", config.buf);
  fflush(stdout);

  for (unsigned i = 1; i < config.threads; ++i) {
    int error = pthread_create(&loops[i].thread, NULL, run_loop, &loops[i]);
    if (error != 0) {
      errno = error;
      die("pthread_create");
    }
  }
  run_loop(first);
  for (unsigned i = 1; i < config.threads; ++i) pthread_join(loops[i].thread, NULL);
  for (unsigned i = 0; i < config.threads; ++i) close_loop(&loops[i]);
  free(loops);
  close(stop_fd);
  printf("otechod: stopped\n");
  return 0;
}
