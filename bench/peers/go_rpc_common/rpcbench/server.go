package rpcbench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
)

// ServerConfig is the command line every Go peer server takes.
type ServerConfig struct {
	Host    string
	Port    int
	Threads int
}

// Address is HOST:PORT to listen on.
func (c ServerConfig) Address() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// ParseServer reads `--host 127.0.0.1 --port 0 --threads 1` for the program called name (about
// is its --help text), exiting 0 after --help and 2 on a bad argument, and sets GOMAXPROCS to
// --threads (0 keeps Go's default, one per CPU). From main.
func ParseServer(name, about string, args []string) ServerConfig {
	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "%s\n\nOptions:\n", about)
		flags.PrintDefaults()
	}
	var c ServerConfig
	flags.StringVar(&c.Host, "host", "127.0.0.1", "address to listen on")
	flags.IntVar(&c.Port, "port", 0, "TCP port (0: the kernel picks; printed at start)")
	flags.IntVar(&c.Threads, "threads", 1, "GOMAXPROCS: OS threads running Go code at once (0: Go's default, one per CPU)")
	parseOrExit(flags, args)
	if c.Port < 0 || c.Port > 65535 || c.Threads < 0 {
		fmt.Fprintf(os.Stderr, "%s: --port must be 0..65535 and --threads at least 0\n", name)
		os.Exit(2)
	}
	if c.Threads > 0 {
		runtime.GOMAXPROCS(c.Threads)
	}
	return c
}

// parseOrExit parses args, exiting 0 after --help and 2 on a bad argument.
func parseOrExit(flags *flag.FlagSet, args []string) {
	err := flags.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err == nil && flags.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", flags.Arg(0))
		fmt.Fprintf(flags.Output(), "%s: %v\n", flags.Name(), err)
	}
	if err != nil {
		os.Exit(2)
	}
}

// StopSignals delivers SIGINT and SIGTERM from now on (instead of their killing the process).
// From main, before the server announces itself.
func StopSignals() <-chan os.Signal {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	return signals
}

// Announce prints "NAME: listening on HOST:PORT (details, GOMAXPROCS n, go version)" on stdout,
// the line bench/suite reads the port from. Any goroutine, once the server accepts.
func Announce(name string, addr net.Addr, details string) {
	fmt.Fprintf(os.Stdout, "%s: listening on %s (%s, GOMAXPROCS %d, %s)\n", name, addr.String(),
		details, runtime.GOMAXPROCS(0), runtime.Version())
	os.Stdout.Sync()
}

// Stopped prints "NAME: stopped" on stdout. From main, at the end.
func Stopped(name string) {
	io.WriteString(os.Stdout, name+": stopped\n")
	os.Stdout.Sync()
}

// ModuleVersion is the version of the module at path linked into this program, "" if unknown.
// Any goroutine.
func ModuleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			return dep.Version
		}
	}
	return ""
}
