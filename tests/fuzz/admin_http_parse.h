#pragma once

// The admin endpoint's request-head parser (src/admin/admin_http.h parse_request_head) fed a
// request as it arrives: what the libFuzzer target admin_http_fuzz feeds and what its seed corpus
// check runs. Any thread.

#include <cstddef>
#include <span>

#include "admin/admin_http.h"

namespace tern::fuzz {

// What parse_head_arrivals found.
struct HeadArrivals {
  admin::detail::HeadState state = admin::detail::HeadState::incomplete;  // for the whole input
  std::size_t parses = 0;                                                 // prefixes parsed
};

// Input layout: byte 0 sets the head limit (16 bytes per unit, 16 to 4096), byte 1 the read sizes
// (0: the whole text at once, n: reads of 1 to n bytes), the rest is the text. Parses every prefix
// the reads deliver and checks each answer: a complete head's views lie in the text, the head is
// within the limit, an incomplete prefix is too; a complete head stays the same and a rejected one
// stays rejected as more bytes arrive. Aborts when a check fails.
HeadArrivals parse_head_arrivals(std::span<const std::byte> input);

}  // namespace tern::fuzz
