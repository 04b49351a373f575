#include "tern/rpc/auth.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

namespace tern::rpc {

namespace {

constexpr std::string_view kScheme = "Bearer ";

// The interceptor both overloads build: reads the token from the metadata and asks `accept`.
Interceptor make_interceptor(
    std::function<bool(std::string_view token, const ServerContext& context)> accept) {
  return [accept = std::move(accept)](ServerContext& context, const Next& next) -> Status {
    const std::optional<std::string_view> given = context.metadata("authorization");
    if (!given) {
      return {StatusCode::unauthenticated,
              "the call carries no \"authorization\" metadata (\"Bearer <token>\" expected)"};
    }
    if (!given->starts_with(kScheme) || given->size() == kScheme.size()) {
      return {StatusCode::unauthenticated,
              "the \"authorization\" metadata is not of the form \"Bearer <token>\""};
    }
    if (!accept(given->substr(kScheme.size()), context)) {
      return {StatusCode::unauthenticated, "the bearer token is not accepted"};
    }
    return next(context);
  };
}

}  // namespace

bool equal_in_constant_time(std::string_view a, std::string_view b) noexcept {
  // Every byte of the longer one is looked at whatever the contents; the lengths are not secret.
  const std::size_t n = std::max(a.size(), b.size());
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    difference |= static_cast<unsigned char>(x ^ y);
  }
  return difference == 0;
}

Interceptor bearer_token_interceptor(std::vector<std::string> tokens) {
  std::erase_if(tokens, [](const std::string& token) { return token.empty(); });
  auto accepted = std::make_shared<const std::vector<std::string>>(std::move(tokens));
  return make_interceptor([accepted](std::string_view token, const ServerContext&) {
    // Compares with every token, so the time does not tell which one (if any) matched.
    bool found = false;
    for (const std::string& candidate : *accepted)
      found = equal_in_constant_time(token, candidate) || found;
    return found;
  });
}

Interceptor bearer_token_interceptor(
    std::function<bool(std::string_view token, const ServerContext& context)> accept) {
  return make_interceptor(std::move(accept));
}

}  // namespace tern::rpc
