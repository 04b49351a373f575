// rpcx_rpc_client: the rpcx client of report 001's RPC benchmark. -c clients, each an rpcx
// client.Client with its own TCP connection and protobuf serialization, each on its own goroutine
// making its share of -n calls to BenchmarkService.Say one after another; every reply is checked
// and every call timed (see tern.bench/rpcbench.RunClient).
//
//	rpcx_rpc_client --target HOST:PORT -c 100 -n 1000000 [--threads 1] [--timeout 10] [--json]
package main

import (
	"context"
	"os"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"tern.bench/benchpb"
	"tern.bench/rpcbench"
	"tern.local/bench/peers/rpcx_rpc/logging"
)

// conn is one rpcx client (one connection).
type conn struct {
	client *client.Client
}

func dial(target string, timeout time.Duration) (rpcbench.Conn, error) {
	option := client.DefaultOption
	option.SerializeType = protocol.ProtoBuffer
	option.ConnectTimeout = timeout
	c := client.NewClient(option)
	if err := c.Connect("tcp", target); err != nil {
		return nil, err
	}
	return &conn{client: c}, nil
}

func (c *conn) Call(req *benchpb.BenchmarkMessage, timeout time.Duration) (*benchpb.BenchmarkMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply := new(benchpb.BenchmarkMessage)
	if err := c.client.Call(ctx, "BenchmarkService", "Say", req, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

func (c *conn) Close() error { return c.client.Close() }

func main() {
	logging.Setup()
	os.Exit(rpcbench.RunClient("rpcx", "rpcx_rpc_client: the rpcx client of report 001's RPC "+
		"benchmark: -c clients, each with its own connection, make -n calls in all to\n"+
		"BenchmarkService.Say, each client one call after another; replies checked, calls timed.",
		os.Args[1:], dial))
}
