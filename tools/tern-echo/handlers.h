#pragma once

#include <cstddef>

#include "config.h"
#include "tern/net/tcp_stream.h"

// What tern-echo does with one connection, a function per mode. Each runs on the connection's
// fiber until the peer closes, an I/O fails or the bytes break the mode's protocol, and returns
// without closing the stream (the server does).
namespace tern::echo {

// echo: writes back whatever arrives (report 003's pingpong, report 004's sessions).
void echo_stream(net::TcpStream& stream, std::size_t buf_size);

// echo for --stack-mode shared, lean on memory: holds the read buffer only while bytes are
// there, and gives it back whenever a read left the socket empty, so a connection idle between
// bursts costs no buffer (a malloc and free per burst instead).
void echo_stream_lean(net::TcpStream& stream, std::size_t buf_size);

// discard: reads and drops everything (report 000's "server discards input").
void discard_stream(net::TcpStream& stream, std::size_t buf_size);

// frame16: answers 16-byte-header messages (report 000; tools/common/frame16_echo.h): cmd 1 is
// echoed with ack = syn, cmd 2 gets nothing. A malformed header or a payload over `max_payload`
// closes the connection (after the replies to the messages before it), with a peer log line.
void frame16_stream(net::TcpStream& stream, std::size_t buf_size, std::size_t max_payload);

// ttcp: answers each message of a 4-byte big-endian length and its payload with the 4-byte length
// (report 002); a length over `max_payload` closes the connection. The payload streams through
// one buffer of `buf_size` bytes: what a connection holds never depends on the announced length.
void ttcp_stream(net::TcpStream& stream, std::size_t buf_size, std::size_t max_payload);

// The whole life of one connection under `config`: waits for its first bytes (an idle
// connection holds no read buffer), sets TCP_NODELAY and runs the mode's function. The
// connection's fiber.
void serve_connection(net::TcpStream& stream, const EchoConfig& config);

}  // namespace tern::echo
