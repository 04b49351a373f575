// erpc_rpc_client: the erpc client of report 001's RPC benchmark (erpc v6.3.5). One erpc peer
// dials -c sessions, each its own TCP connection with the protobuf body codec, each on its own
// goroutine making its share of -n calls to /benchmark/say one after another; every reply is
// checked and every call timed (see tern.bench/rpcbench.RunClient).
//
// Connections are dialed with Go's plain net.Dialer and handed to erpc (Peer.ServeConn), as every
// other client of the table dials: erpc's own Dial binds each socket to 0.0.0.0:0 before
// connecting, and a port taken by bind() must be free of every other socket, TIME_WAIT ones
// included, so after the earlier cells' connections 5,000 sessions ran out of ports ("bind:
// address already in use"). connect() picks a port per destination and reuses TIME_WAIT ports on
// loopback (net.ipv4.tcp_tw_reuse). ServeConn gives the same session, named by its local address
// as Dial names it (localAddressID; by default it would be named by the server's address, which
// every session shares, and erpc closes a session whose name a newer one takes); erpc's redial
// (off here) is the only thing it leaves out.
//
//	erpc_rpc_client --target HOST:PORT -c 100 -n 1000000 [--threads 1] [--timeout 10] [--json]
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	erpc "github.com/henrylee2cn/erpc/v6"

	"tern.bench/benchpb"
	"tern.bench/rpcbench"
	"tern.local/bench/peers/erpc_rpc/logging"
)

var (
	peerOnce sync.Once
	peer     erpc.Peer
)

// conn is one erpc session (one connection) and the timer that bounds its calls.
type conn struct {
	session erpc.Session
	timer   *time.Timer
}

var errTimeout = errors.New("call timed out")

// localAddressID names each session by its local address before erpc files it, as Dial does.
type localAddressID struct{}

func (localAddressID) Name() string { return "local-address-id" }

func (localAddressID) PostAccept(session erpc.PreSession) *erpc.Status {
	session.SetID(session.LocalAddr().String())
	return nil
}

func dial(target string, timeout time.Duration) (rpcbench.Conn, error) {
	peerOnce.Do(func() {
		logging.Setup()
		peer = erpc.NewPeer(erpc.PeerConfig{DefaultBodyCodec: "protobuf", DialTimeout: timeout},
			localAddressID{})
	})
	socket, err := (&net.Dialer{Timeout: timeout}).Dial("tcp", target)
	if err != nil {
		return nil, err
	}
	session, stat := peer.ServeConn(socket)
	if !stat.OK() {
		socket.Close()
		return nil, stat.Cause()
	}
	timer := time.NewTimer(timeout)
	timer.Stop()
	return &conn{session: session, timer: timer}, nil
}

// Call is erpc's Call (AsyncCall, then wait for it) with the wait bounded by timeout.
func (c *conn) Call(req *benchpb.BenchmarkMessage, timeout time.Duration) (*benchpb.BenchmarkMessage, error) {
	reply := new(rpcbench.Wire)
	cmd := c.session.AsyncCall("/benchmark/say", &rpcbench.Wire{Msg: req}, reply,
		make(chan erpc.CallCmd, 1))
	c.timer.Reset(timeout)
	select {
	case <-cmd.Done():
		c.timer.Stop()
	case <-c.timer.C:
		return nil, errTimeout
	}
	if stat := cmd.Status(); !stat.OK() {
		return nil, fmt.Errorf("erpc status %d (%s): %v", stat.Code(), stat.Msg(), stat.Cause())
	}
	return reply.Msg, nil
}

func (c *conn) Close() error { return c.session.Close() }

func main() {
	os.Exit(rpcbench.RunClient("erpc", "erpc_rpc_client: the erpc client of report 001's RPC "+
		"benchmark: -c sessions, each with its own connection, make -n calls in all to\n"+
		"/benchmark/say, each session one call after another; replies checked, calls timed.",
		os.Args[1:], dial))
}
