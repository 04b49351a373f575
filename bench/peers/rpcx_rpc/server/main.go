// rpcx_rpc_server: the rpcx peer server of report 001's RPC benchmark. It serves
// BenchmarkService.Say with rpcx v1.8.31 and its protobuf serialization: the request decoded, its
// field1 set to "OK" and field2 to 100, encoded as the reply (bench/proto/README.md).
//
//	rpcx_rpc_server [--host 127.0.0.1] [--port 0] [--threads 1]
//
// --threads sets GOMAXPROCS. rpcx serves each connection on its own goroutine and runs each
// request on a new one (its defaults); its HTTP gateway and JSON-RPC listener are off. Prints
// "rpcx_rpc_server: listening on HOST:PORT (...)" once it accepts; stops on SIGINT/SIGTERM, exit 0.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/smallnest/rpcx/server"

	"tern.bench/rpcbench"
	"tern.local/bench/peers/rpcx_rpc/logging"
)

const name = "rpcx_rpc_server"

// BenchmarkService is the rpcx service "BenchmarkService".
type BenchmarkService struct{}

// Say answers with the message it decoded, changed as the benchmark says. Its argument and
// reply are rpcbench.Wire so that rpcx's protobuf codec decodes into and encodes from the same
// message: rpcx recycles the argument before it encodes the reply, and a Wire's recycling drops
// only its pointer.
func (BenchmarkService) Say(_ context.Context, args *rpcbench.Wire, reply *rpcbench.Wire) error {
	rpcbench.Answer(args.Msg)
	reply.Msg = args.Msg
	return nil
}

func main() {
	cfg := rpcbench.ParseServer(name,
		name+": the rpcx peer server of report 001's RPC benchmark (BenchmarkService.Say,\n"+
			"protobuf serialization). Prints '"+name+": listening on HOST:PORT' when ready;\n"+
			"stops on SIGINT/SIGTERM.", os.Args[1:])
	logging.Setup()
	stop := rpcbench.StopSignals()
	listener, err := net.Listen("tcp", cfg.Address())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	s := server.NewServer()
	s.DisableHTTPGateway = true
	s.DisableJSONRPC = true
	if err := s.RegisterName("BenchmarkService", new(BenchmarkService), ""); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	served := make(chan error, 1)
	go func() { served <- s.ServeListener("tcp", listener) }()
	rpcbench.Announce(name, listener.Addr(),
		"rpcx "+rpcbench.ModuleVersion("github.com/smallnest/rpcx")+", protobuf")

	select {
	case <-stop:
	case err := <-served:
		fmt.Fprintf(os.Stderr, "%s: serving stopped: %v\n", name, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.Shutdown(ctx)
	rpcbench.Stopped(name)
}
