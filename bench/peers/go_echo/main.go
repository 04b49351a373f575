// go_echo: the Go peer echo server of tern's benchmarks (report 003 pingpong, 000 echo,
// 004 sessions), written the way Go servers are: one goroutine per connection doing blocking
// Read/Write on a reused buffer, the runtime's netpoller underneath. Standard library only.
// With -tls-cert and -tls-key every connection is served over crypto/tls (the peer of the
// "tls" table: handshakes with Go's defaults, X25519 first, session tickets on).
//
//	go_echo [--host 127.0.0.1] [--port 0] [--threads 1] [--buf 16384] [--duration 0]
//	        [--tls-cert server.crt --tls-key server.key]
//
// Prints "go_echo: listening on HOST:PORT (...)" once it accepts; stops on SIGINT/SIGTERM or
// after --duration seconds, exit status 0.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// server tracks the live connections so a stop can close them.
type server struct {
	listener net.Listener
	tls      *tls.Config // nil: plaintext
	buf      int
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	stopped  bool
	wg       sync.WaitGroup
}

// serve accepts until the listener is closed, starting a goroutine per connection.
func (s *server) serve() {
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or an aborted handshake: back off briefly, keep serving.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if !s.track(conn) {
			conn.Close()
			return
		}
		go s.echo(conn)
	}
}

// track records conn as live; false once the server is stopping.
func (s *server) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.conns[conn] = struct{}{}
	s.wg.Add(1)
	return true
}

// echo writes back every byte it reads until the peer closes or resets the connection.
func (s *server) echo(conn net.Conn) {
	stream := conn
	defer func() {
		stream.Close() // over TLS, sends close_notify first
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		s.wg.Done()
	}()
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
	}
	if s.tls != nil {
		// The handshake runs on the first Read; a failed one ends the connection.
		stream = tls.Server(conn, s.tls)
	}
	buf := make([]byte, s.buf)
	for {
		n, err := stream.Read(buf)
		if n > 0 {
			if _, werr := stream.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stop closes the listener and every live connection, then waits for their goroutines.
func (s *server) stop() {
	s.mu.Lock()
	s.stopped = true
	s.listener.Close()
	for conn := range s.conns {
		conn.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func main() {
	flag.Usage = func() {
		out := flag.CommandLine.Output()
		fmt.Fprintf(out, "go_echo: a goroutine-per-connection echo server (Go standard library net).\n"+
			"Prints 'go_echo: listening on HOST:PORT' when ready; stops on SIGINT/SIGTERM or after\n"+
			"--duration seconds.\n\nOptions:\n")
		flag.PrintDefaults()
	}
	host := flag.String("host", "127.0.0.1", "IPv4/IPv6 address to listen on")
	port := flag.Int("port", 0, "TCP port (0: the kernel picks; printed at start)")
	threads := flag.Int("threads", 1, "GOMAXPROCS: OS threads running Go code at once (0: Go's default, one per CPU)")
	buf := flag.Int("buf", 16*1024, "read buffer per connection, bytes")
	duration := flag.Float64("duration", 0, "stop after this many seconds (0: on a signal)")
	tlsCert := flag.String("tls-cert", "", "serve TLS with this PEM certificate chain (with -tls-key)")
	tlsKey := flag.String("tls-key", "", "the PEM private key of -tls-cert")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "go_echo: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	if *buf < 1 {
		*buf = 1
	}

	var tlsConfig *tls.Config
	if (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintln(os.Stderr, "go_echo: -tls-cert and -tls-key go together")
		os.Exit(2)
	}
	if *tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintf(os.Stderr, "go_echo: %v\n", err)
			os.Exit(1)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{pair}}
	}

	listener, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go_echo: %v\n", err)
		os.Exit(1)
	}
	addr := listener.Addr().(*net.TCPAddr)
	s := &server{listener: listener, tls: tlsConfig, buf: *buf, conns: make(map[net.Conn]struct{})}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	var timeout <-chan time.Time
	if *duration > 0 {
		timeout = time.After(time.Duration(*duration * float64(time.Second)))
	}

	security := "plaintext"
	if tlsConfig != nil {
		security = "crypto/tls"
	}
	fmt.Printf("go_echo: listening on %s:%d (GOMAXPROCS %d, buf %d, %s, %s)\n",
		addr.IP.String(), addr.Port, runtime.GOMAXPROCS(0), *buf, security, runtime.Version())
	os.Stdout.Sync()

	done := make(chan struct{})
	go func() {
		s.serve()
		close(done)
	}()
	select {
	case <-signals:
	case <-timeout:
	case <-done:
	}
	s.stop()
	fmt.Println("go_echo: stopped")
}
