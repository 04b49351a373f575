// Package rpcbench is what the Go peers of report 001's RPC benchmark share (rpcx_rpc and
// erpc_rpc): the request and the reply check of bench/proto/README.md, the server's answer, a
// codec adapter, and the command lines and load loop of their servers and clients.
package rpcbench

import (
	"errors"

	"google.golang.org/protobuf/proto"

	"tern.bench/benchpb"
)

// PayloadText is the 57-byte ASCII string of the request's seven string fields.
const PayloadText = "tern rpc benchmark payload, fifty-seven bytes of ASCII..."

// RequestBytes is the encoded size of the request NewRequest builds.
const RequestBytes = 583

const number int32 = 100000

// NewRequest builds the request of bench/proto/README.md. Any goroutine.
func NewRequest() *benchpb.BenchmarkMessage {
	text := func() *string { return proto.String(PayloadText) }
	num := func() *int32 { return proto.Int32(number) }
	yes := func() *bool { return proto.Bool(true) }
	return &benchpb.BenchmarkMessage{
		Field1:   text(),
		Field9:   text(),
		Field18:  text(),
		Field4:   text(),
		Field7:   text(),
		Field102: text(),
		Field103: text(),

		Field2:   num(),
		Field3:   num(),
		Field280: num(),
		Field6:   num(),
		Field16:  num(),
		Field130: num(),
		Field104: num(),
		Field100: num(),
		Field101: num(),
		Field29:  num(),
		Field60:  num(),
		Field150: num(),
		Field23:  num(),
		Field25:  num(),
		Field67:  num(),
		Field68:  num(),
		Field128: num(),
		Field131: num(),
		Field271: num(),
		Field272: num(),

		Field22: proto.Int64(5000000000),
		Field5:  []uint64{1, 2, 3, 4},

		Field80: yes(),
		Field81: yes(),
		Field59: yes(),
		Field12: yes(),
		Field17: yes(),
		Field13: yes(),
		Field14: yes(),
		Field30: yes(),
		Field24: yes(),
		Field78: yes(),
	}
}

// Answer turns a decoded request into the server's reply: field1 = "OK", field2 = 100. Called
// by the goroutine that owns m.
func Answer(m *benchpb.BenchmarkMessage) {
	m.Field1 = proto.String("OK")
	m.Field2 = proto.Int32(100)
}

// CheckReply says why reply is not the server's answer to the request (nil when it is): field1
// must be "OK", field2 100 and the untouched field3 still 100000. Any goroutine.
func CheckReply(reply *benchpb.BenchmarkMessage) error {
	switch {
	case reply == nil:
		return errors.New("no reply message")
	case reply.GetField1() != "OK":
		return errors.New(`reply field1 is not "OK"`)
	case reply.GetField2() != 100:
		return errors.New("reply field2 is not 100")
	case reply.GetField3() != number:
		return errors.New("reply field3 is not 100000")
	}
	return nil
}
