// Package logging points rpcx's log at stderr, errors only, for both rpcx peer programs: rpcx
// logs to stdout by default, where the client's JSON line and the server's listening line go.
package logging

import (
	stdlog "log"
	"os"

	"github.com/smallnest/rpcx/log"
)

// Setup sends rpcx's log to stderr, errors only. From main, before rpcx is used.
func Setup() {
	log.SetLogger(log.NewDefaultLogger(os.Stderr, "rpcx: ", stdlog.LstdFlags, log.LvError))
}
