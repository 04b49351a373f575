// erpc_rpc_server: the erpc peer server of report 001's RPC benchmark (erpc v6.3.5, the
// successor of the teleport the report measured). It serves the call route /benchmark/say with
// erpc's protobuf body codec: the request decoded, its field1 set to "OK" and field2 to 100,
// encoded as the reply (bench/proto/README.md).
//
//	erpc_rpc_server [--host 127.0.0.1] [--port 0] [--threads 1]
//
// --threads sets GOMAXPROCS. erpc reads each connection on its own goroutine and handles calls on
// goroutines of its pool (its defaults); its log goes to stderr, errors only. Prints
// "erpc_rpc_server: listening on HOST:PORT (...)" once it accepts; stops on SIGINT/SIGTERM, exit 0.
package main

import (
	"fmt"
	"net"
	"os"

	erpc "github.com/henrylee2cn/erpc/v6"

	"tern.bench/rpcbench"
	"tern.local/bench/peers/erpc_rpc/logging"
)

const name = "erpc_rpc_server"

// Benchmark is the call controller whose method Say erpc routes as /benchmark/say.
type Benchmark struct {
	erpc.CallCtx
}

// Say answers with the message it decoded, changed as the benchmark says.
func (*Benchmark) Say(arg *rpcbench.Wire) (*rpcbench.Wire, *erpc.Status) {
	rpcbench.Answer(arg.Msg)
	return arg, nil
}

// announcer prints the listening line once erpc's listener is open (erpc's PostListen plugin
// point is where the port the kernel picked is known).
type announcer struct{}

func (announcer) Name() string { return "announcer" }

func (announcer) PostListen(addr net.Addr) error {
	rpcbench.Announce(name, addr, "erpc "+rpcbench.ModuleVersion("github.com/henrylee2cn/erpc/v6")+", protobuf")
	return nil
}

func main() {
	cfg := rpcbench.ParseServer(name,
		name+": the erpc peer server of report 001's RPC benchmark (/benchmark/say,\n"+
			"protobuf codec). Prints '"+name+": listening on HOST:PORT' when ready; stops on\n"+
			"SIGINT/SIGTERM.", os.Args[1:])
	stop := rpcbench.StopSignals()
	logging.Setup()
	peer := erpc.NewPeer(erpc.PeerConfig{
		Network:          "tcp",
		LocalIP:          cfg.Host,
		ListenPort:       uint16(cfg.Port),
		DefaultBodyCodec: "protobuf",
	}, announcer{})
	peer.RouteCall(new(Benchmark))
	served := make(chan error, 1)
	go func() { served <- peer.ListenAndServe() }()

	select {
	case <-stop:
	case err := <-served:
		fmt.Fprintf(os.Stderr, "%s: serving stopped: %v\n", name, err)
		os.Exit(1)
	}
	peer.Close()
	rpcbench.Stopped(name)
}
