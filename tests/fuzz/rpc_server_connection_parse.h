#pragma once

// The whole server side of a tern RPC connection under attack: a real rpc::Server on 127.0.0.1:0
// (one tern::Runtime worker on a thread of its own, started on first use) is sent a fuzz input's
// bytes over a real connection, then must still answer a well-formed call on another connection,
// close the attacked connection and keep every connection's memory within its budget. What the
// libFuzzer target rpc_server_connection_fuzz feeds and what its seed corpus check runs. Any one
// thread at a time (the calls are serialized by the caller, as libFuzzer does).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tern::fuzz {

// The service the fuzz server hosts. Echo answers with its request, which must parse as a
// tern.rpc.wire.Metadata message (invalid_argument otherwise); Hold keeps its call for up to
// 100 ms or until it is cancelled, then answers ok with an empty reply.
inline constexpr std::string_view kFuzzService = "tern.fuzz.Target";
inline constexpr std::string_view kEchoMethod = "Echo";
inline constexpr std::string_view kHoldMethod = "Hold";
inline constexpr std::string_view kStreamMethod = "Stream";  // echoes a stream's messages

// An input is one control byte and then the bytes the attacking connection sends. The control
// byte's low four bits are the largest write (0: everything in one write; else writes of 1 to
// that many bytes); its other bits are these flags.
inline constexpr std::uint8_t kChunkMask = 0x0f;
inline constexpr std::uint8_t kReadBack = 0x10;  // half-close, then read the server's frames
inline constexpr std::uint8_t kReset = 0x20;     // end with a reset (SO_LINGER 0), not a FIN

// What the server sent back on the attacking connection (with kReadBack; all zero without).
struct ServerConnectionOutcome {
  std::size_t responses = 0;     // response frames
  std::size_t ok_responses = 0;  // of those, with status ok
  std::size_t pongs = 0;
  std::size_t stream_messages = 0;     // stream message frames
  std::size_t ok_stream_statuses = 0;  // stream status frames with status ok
  bool goaway = false;                 // the server sent goaway
  bool closed = false;                 // the server closed the connection within the read deadline
  // The most bytes one connection of the fuzz server has held so far (all inputs included).
  std::uint64_t connection_bytes_peak = 0;
};

// Runs one input against the fuzz server and checks the invariants; aborts (with a message on
// stderr) when one breaks: the server stopped answering, sent bytes that are not frames, kept
// the attacked connection open after it was closed, or held more memory for a connection than
// its budget allows.
ServerConnectionOutcome run_server_connection(std::span<const std::byte> input);

}  // namespace tern::fuzz
