// Package logging points erpc's log at stderr and cuts it down to errors, for both erpc peer
// programs: erpc writes ERROR and CRITICAL lines to stdout by default, where the client's JSON
// line and the server's listening line go, and logs every accepted connection at INFO.
package logging

import (
	"os"

	erpc "github.com/henrylee2cn/erpc/v6"
)

// stderrOutputter writes each erpc log line to stderr as it comes.
type stderrOutputter struct{}

func (stderrOutputter) Output(_ int, msg []byte, _ erpc.LoggerLevel) {
	line := make([]byte, 0, len(msg)+6)
	line = append(append(append(line, "erpc: "...), msg...), '\n')
	os.Stderr.Write(line)
}

func (stderrOutputter) Flush() error { return nil }

// Setup sends erpc's log to stderr, errors only. From main, before the first erpc peer.
func Setup() {
	erpc.SetLoggerOutputter(stderrOutputter{})
	erpc.SetLoggerLevel("ERROR")
}
