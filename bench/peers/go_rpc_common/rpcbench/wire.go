package rpcbench

import (
	"errors"

	"google.golang.org/protobuf/proto"

	"tern.bench/benchpb"
)

// Wire carries a BenchmarkMessage through codecs that encode a value by calling its own
// Marshal and Unmarshal methods (gogo/protobuf's Marshaler and Unmarshaler interfaces, which
// erpc's and rpcx's protobuf codecs try first); both methods use google.golang.org/protobuf.
// A server can answer with the very message it decoded (reply.Msg = args.Msg): no copy. A Wire
// is used by one goroutine at a time.
type Wire struct {
	Msg *benchpb.BenchmarkMessage
}

var errNoMessage = errors.New("rpcbench.Wire: no message to encode")

// Marshal encodes Msg.
func (w *Wire) Marshal() ([]byte, error) {
	if w.Msg == nil {
		return nil, errNoMessage
	}
	return proto.Marshal(w.Msg)
}

// Unmarshal decodes data into a new Msg (required fields checked).
func (w *Wire) Unmarshal(data []byte) error {
	m := new(benchpb.BenchmarkMessage)
	if err := proto.Unmarshal(data, m); err != nil {
		return err
	}
	w.Msg = m
	return nil
}

// Reset drops Msg (the message itself is left as it is).
func (w *Wire) Reset() { w.Msg = nil }

// String is Msg in protobuf text form.
func (w *Wire) String() string {
	if w.Msg == nil {
		return "<nil>"
	}
	return w.Msg.String()
}

// ProtoMessage marks Wire as a gogo/protobuf message, as erpc's protobuf codec requires.
func (*Wire) ProtoMessage() {}
