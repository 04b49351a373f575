package rpcbench

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"tern.bench/benchpb"
)

// Conn is one client connection of a framework, used by one goroutine at a time.
type Conn interface {
	// Call makes one unary call with req and returns the decoded reply, giving up after timeout.
	Call(req *benchpb.BenchmarkMessage, timeout time.Duration) (*benchpb.BenchmarkMessage, error)
	// Close closes the connection.
	Close() error
}

// Dialer opens one connection to target (HOST:PORT) within timeout. Called from several
// goroutines at once.
type Dialer func(target string, timeout time.Duration) (Conn, error)

// clientConfig is the command line every Go peer client takes.
type clientConfig struct {
	target      string
	concurrency int
	calls       int
	threads     int
	timeout     time.Duration
	json        bool
}

const (
	maxErrorMessages = 5
	// dialers is how many connections are opened at once before the run.
	dialers = 64
	// closeWait bounds closing the connections after the run.
	closeWait = 2 * time.Second
	// giveUpAfter failed calls in a row end a client's run: each call it has left counts as an
	// error, so that a server that stopped answering cannot hold the run for calls x timeout.
	giveUpAfter   = 3
	giveUpMessage = "not made: the client gave up after 3 failed calls in a row"
)

// errorLog counts errors and keeps the first few distinct messages. Any goroutine.
type errorLog struct {
	mu       sync.Mutex
	count    atomic.Int64
	messages []string
}

func (l *errorLog) add(message string) { l.addN(message, 1) }

// addN counts n errors with the same message.
func (l *errorLog) addN(message string, n int) {
	l.count.Add(int64(n))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.messages) < maxErrorMessages && !slices.Contains(l.messages, message) {
		l.messages = append(l.messages, message)
	}
}

// report is the one line of JSON a client prints with --json (the shape tern-bench rpc prints).
type report struct {
	Tool          string   `json:"tool"`
	Mode          string   `json:"mode"`
	Target        string   `json:"target"`
	Params        params   `json:"params"`
	Figures       figures  `json:"figures"`
	Errors        int64    `json:"errors"`
	Verified      bool     `json:"verified"`
	ErrorMessages []string `json:"error_messages"`
}

type params struct {
	Concurrency  int `json:"concurrency"`
	Calls        int `json:"calls"`
	MessageBytes int `json:"message_bytes"`
}

type figures struct {
	Calls   int      `json:"calls"`
	TPS     float64  `json:"tps"`
	Mean    *float64 `json:"mean_us"`
	P50     *float64 `json:"p50_us"`
	P90     *float64 `json:"p90_us"`
	P99     *float64 `json:"p99_us"`
	P999    *float64 `json:"p999_us"`
	Min     *float64 `json:"min_us"`
	Max     *float64 `json:"max_us"`
	Elapsed float64  `json:"elapsed_s"`
}

// parseClient reads `--target HOST:PORT -c C -n N [--threads 1] [--timeout 10] [--json]`,
// exiting 0 after --help and 2 on a bad argument.
func parseClient(tool, about string, args []string) clientConfig {
	flags := flag.NewFlagSet(tool, flag.ContinueOnError)
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "%s\n\nOptions:\n", about)
		flags.PrintDefaults()
	}
	var c clientConfig
	var timeout float64
	flags.StringVar(&c.target, "target", "", "server address, HOST:PORT (required)")
	flags.IntVar(&c.concurrency, "c", 0, "clients, each with its own connection (required)")
	flags.IntVar(&c.concurrency, "concurrency", 0, "same as -c")
	flags.IntVar(&c.calls, "n", 0, "calls in all, shared out among the clients (required)")
	flags.IntVar(&c.calls, "calls", 0, "same as -n")
	flags.IntVar(&c.threads, "threads", 1, "GOMAXPROCS of the client (0: Go's default, one per CPU)")
	flags.Float64Var(&timeout, "timeout", 10, "seconds one call may take")
	flags.BoolVar(&c.json, "json", false, "print one line of JSON on stdout (the summary goes to stderr)")
	parseOrExit(flags, args)
	var problem string
	switch {
	case c.target == "":
		problem = "--target is required"
	case c.concurrency < 1 || c.calls < 1:
		problem = "-c and -n must be at least 1"
	case c.calls < c.concurrency:
		problem = "-n must be at least -c (every client makes a call)"
	case c.threads < 0:
		problem = "--threads must be at least 0"
	case !(timeout > 0):
		problem = "--timeout must be positive"
	}
	if problem != "" {
		fmt.Fprintf(os.Stderr, "%s: %s\n", tool, problem)
		os.Exit(2)
	}
	c.timeout = time.Duration(timeout * float64(time.Second))
	return c
}

// RunClient is the whole client program of a Go peer called tool (its --help text is about):
// it parses args, opens -c connections with dial, has each make its share of -n calls one
// after another on its own goroutine, checks and times every reply, prints progress on stderr
// once a second and the summary (and with --json one line of JSON on stdout), and returns the
// exit status: 0 verified, 1 not. The connections are open before the clock starts; latency is
// the monotonic time of Conn.Call over every verified reply, percentiles exact (all samples
// sorted). A client whose dial failed, or whose calls failed 3 times in a row, makes no more
// calls, and each call it has left counts as an error. From main.
func RunClient(tool, about string, args []string, dial Dialer) int {
	c := parseClient(tool, about, args)
	if c.threads > 0 {
		runtime.GOMAXPROCS(c.threads)
	}
	var errs errorLog
	conns := dialAll(c, dial, &errs)

	type result struct{ latencies []int64 }
	results := make([]result, c.concurrency)
	var done atomic.Int64
	var wg sync.WaitGroup
	stopProgress := startProgress(&done, &errs.count)
	start := time.Now()
	for i := range c.concurrency {
		share := c.calls / c.concurrency
		if i < c.calls%c.concurrency {
			share++
		}
		if conns[i] == nil {
			continue
		}
		wg.Add(1)
		go func(conn Conn, share int, out *result) {
			defer wg.Done()
			out.latencies = make([]int64, 0, share)
			req := NewRequest()
			failures := 0
			for k := range share {
				begin := time.Now()
				reply, err := conn.Call(req, c.timeout)
				elapsed := time.Since(begin)
				if err == nil {
					err = CheckReply(reply)
				}
				if err == nil {
					failures = 0
					out.latencies = append(out.latencies, elapsed.Nanoseconds())
					done.Add(1)
					continue
				}
				errs.add(err.Error())
				if failures++; failures == giveUpAfter && k+1 < share {
					errs.addN(giveUpMessage, share-k-1)
					return
				}
			}
		}(conns[i], share, &results[i])
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	stopProgress()
	closeAll(conns)

	all := make([]int64, 0, c.calls)
	for _, r := range results {
		all = append(all, r.latencies...)
	}
	lat, haveLatency := summarize(all)
	rep := report{
		Tool:   tool,
		Mode:   "rpc",
		Target: "tcp://" + c.target,
		Params: params{Concurrency: c.concurrency, Calls: c.calls,
			MessageBytes: proto.Size(NewRequest())},
		Figures: figures{Calls: len(all), Elapsed: round(elapsed, 3)},
		Errors:  errs.count.Load(),
	}
	if elapsed > 0 {
		rep.Figures.TPS = round(float64(len(all))/elapsed, 1)
	}
	if haveLatency {
		rep.Figures.Mean, rep.Figures.P50, rep.Figures.P90 = &lat.Mean, &lat.P50, &lat.P90
		rep.Figures.P99, rep.Figures.P999 = &lat.P99, &lat.P999
		rep.Figures.Min, rep.Figures.Max = &lat.Min, &lat.Max
	}
	rep.Verified = rep.Errors == 0 && len(all) == c.calls
	rep.ErrorMessages = append([]string{}, errs.messages...)

	text := io.Writer(os.Stdout)
	if c.json {
		text = os.Stderr
	}
	printSummary(text, rep, c, lat, haveLatency)
	if c.json {
		line, _ := json.Marshal(rep)
		os.Stdout.Write(append(line, '\n'))
	}
	if rep.Verified {
		return 0
	}
	return 1
}

// dialAll opens the -c connections, dialers at a time; a failed one is nil, and every call it
// would have made counts as an error.
func dialAll(c clientConfig, dial Dialer, errs *errorLog) []Conn {
	conns := make([]Conn, c.concurrency)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(dialers, c.concurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= c.concurrency {
					return
				}
				conn, err := dial(c.target, c.timeout)
				if err != nil {
					share := c.calls / c.concurrency
					if i < c.calls%c.concurrency {
						share++
					}
					errs.addN("dial: "+err.Error(), share)
					continue
				}
				conns[i] = conn
			}
		}()
	}
	wg.Wait()
	return conns
}

// closeAll closes the connections, giving up after closeWait: a framework may wait for
// calls that timed out to finish first, and the figures are already taken.
func closeAll(conns []Conn) {
	var wg sync.WaitGroup
	for _, conn := range conns {
		if conn != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn.Close()
			}()
		}
	}
	closed := make(chan struct{})
	go func() {
		wg.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(closeWait):
	}
}

// startProgress prints "[   1.0 s] calls N tps X errors E" on stderr once a second until the
// returned function is called.
func startProgress(done, failed *atomic.Int64) (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		begin := time.Now()
		last, lastCount := begin, int64(0)
		for {
			select {
			case <-quit:
				return
			case now := <-ticker.C:
				count := done.Load()
				tps := float64(count-lastCount) / now.Sub(last).Seconds()
				fmt.Fprintf(os.Stderr, "[%6.1f s] calls %d tps %.0f errors %d\n",
					now.Sub(begin).Seconds(), count, tps, failed.Load())
				last, lastCount = now, count
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

func printSummary(w io.Writer, rep report, c clientConfig, lat latencyFigures, haveLatency bool) {
	fmt.Fprintf(w, "%s rpc: %s, %d clients (own connection each), %d calls, %d-byte request, GOMAXPROCS %d, %s\n",
		rep.Tool, rep.Target, c.concurrency, c.calls, rep.Params.MessageBytes, runtime.GOMAXPROCS(0),
		runtime.Version())
	fmt.Fprintf(w, "  %d verified replies in %.3f s: %.1f calls/s\n", rep.Figures.Calls,
		rep.Figures.Elapsed, rep.Figures.TPS)
	if haveLatency {
		fmt.Fprintf(w, "  latency us: mean %.1f, p50 %.1f, p90 %.1f, p99 %.1f, p99.9 %.1f, min %.1f, max %.1f\n",
			lat.Mean, lat.P50, lat.P90, lat.P99, lat.P999, lat.Min, lat.Max)
	}
	if rep.Verified {
		fmt.Fprintf(w, "  verified: yes, 0 errors\n")
		return
	}
	fmt.Fprintf(w, "  FAILED: %d error(s), %d of %d calls verified\n", rep.Errors, rep.Figures.Calls,
		c.calls)
	for _, m := range rep.ErrorMessages {
		fmt.Fprintf(w, "    %s\n", m)
	}
}
