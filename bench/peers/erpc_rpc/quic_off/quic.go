// Package quic declares the part of quic-go's API that erpc v6.3.5's quic package uses, with no
// QUIC behind it: every dial and listen fails with ErrDisabled. It lets erpc build and start on a
// current Go (the real quic-go v0.18.0 does not); the benchmark only uses erpc over TCP.
package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// ErrDisabled is what every dial and listen returns.
var ErrDisabled = errors.New("QUIC is not built into this erpc peer (TCP only)")

// Config holds the one setting erpc passes.
type Config struct {
	KeepAlive bool
}

// ErrorCode is the application error code of CloseWithError.
type ErrorCode uint64

// Stream is a QUIC stream as erpc uses it.
type Stream interface {
	Read(p []byte) (int, error)
	Write(p []byte) (int, error)
	Close() error
	SetDeadline(t time.Time) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}

// Session is a QUIC connection as erpc uses it.
type Session interface {
	OpenStreamSync(ctx context.Context) (Stream, error)
	AcceptStream(ctx context.Context) (Stream, error)
	CloseWithError(code ErrorCode, reason string) error
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
}

// Listener accepts QUIC connections.
type Listener interface {
	Accept(ctx context.Context) (Session, error)
	Close() error
	Addr() net.Addr
}

// DialContext fails with ErrDisabled.
func DialContext(context.Context, net.PacketConn, net.Addr, string, *tls.Config, *Config) (Session, error) {
	return nil, ErrDisabled
}

// Listen fails with ErrDisabled.
func Listen(net.PacketConn, *tls.Config, *Config) (Listener, error) {
	return nil, ErrDisabled
}
