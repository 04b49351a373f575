#pragma once

#include <tern/rpc/server.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::rpc {

// An interceptor that lets a call through only when its metadata "authorization" is
// "Bearer <token>" with one of `tokens` (compared in constant time); any other call is answered
// unauthenticated, saying whether the token was missing, malformed or not accepted. Empty
// tokens are ignored. Add it with Server::add_interceptor before start(); it runs on the
// handler's fiber.
[[nodiscard]] Interceptor bearer_token_interceptor(std::vector<std::string> tokens);

// As above, with `accept` deciding whether a token is valid for the call (it may look at the
// method or at ServerContext::peer_identity()). `accept` runs on the handler's fiber of any
// worker, so it must be safe to call from several threads at once.
[[nodiscard]] Interceptor bearer_token_interceptor(
    std::function<bool(std::string_view token, const ServerContext& context)> accept);

// Whether a and b hold the same bytes, in a time that depends on their lengths only (not on
// where they differ). Any thread.
[[nodiscard]] bool equal_in_constant_time(std::string_view a, std::string_view b) noexcept;

}  // namespace tern::rpc
