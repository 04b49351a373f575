#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tern/base/intrusive_list.h"
#include "tern/rpc/server.h"
#include "tern/rpc/server_context.h"
#include "tern/rpc/service.h"
#include "tern/rpc/stream.h"

namespace tern::rpc::detail {

class ServerConnection;
class Stream;

// One call being served: lives on its own fiber's stack while the handler runs; runs the
// interceptors and the method, then hands the outcome to its connection. Handler fiber only.
class ServerCall final : public UnaryCall {
 public:
  struct Start {
    Service* service = nullptr;
    const Method* method = nullptr;
    std::uint64_t call_id = 0;
    bool one_way = false;
    bool stream = false;  // a streaming call: its messages and status go through a Stream
    bool compressed = false;
    Deadline deadline = kNoDeadline;
    std::size_t held_bytes = 0;  // what the call holds of its connection's memory budget
  };

  ServerCall(ServerConnection& connection, const Server& server, Start start, std::string body,
             MetadataEntries metadata, std::shared_ptr<Stream> stream = nullptr);

  // Runs the call and sends its reply (unless one-way), or a stream's final status.
  void run();

  std::span<const std::byte> request() const noexcept override;
  void reply(const google::protobuf::MessageLite& message) override;

  // Marks the call cancelled by the client.
  // Marks the call cancelled by the client (and the calls its handler makes with contexts
  // from its ServerContext).
  void cancel() noexcept { context_.cancel(); }
  std::uint64_t call_id() const noexcept { return start_.call_id; }
  std::size_t held_bytes() const noexcept { return start_.held_bytes; }
  bool is_stream() const noexcept { return start_.stream; }

  // Runs interceptor `index` of the chain, or the method after the last one.
  Status run_from(std::size_t index);

  ListHook hook;

 private:
  ServerConnection& connection_;
  const Server& server_;
  Start start_;
  std::string body_;
  std::string reply_;
  bool replied_ = false;
  StreamCall stream_;
  ServerContext context_;
};

}  // namespace tern::rpc::detail
