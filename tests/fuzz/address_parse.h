#pragma once

// tern::net::Address::parse on arbitrary text, with the invariants a parsed address must keep:
// what the libFuzzer target address_fuzz feeds and what its seed corpus check runs. Any thread.

#include <string_view>

namespace tern::fuzz {

// What parse_address_text made of its text.
struct AddressSummary {
  bool parsed = false;
  int family = 0;  // AF_INET, AF_INET6 or AF_UNIX when parsed
};

// Parses `text` as an address (never resolving names) and checks the result: a rejection says
// why and quotes the input; an accepted address has the length of its family, the port written
// in the text, and formats back to text that parses to the same address. Aborts when one fails.
AddressSummary parse_address_text(std::string_view text);

}  // namespace tern::fuzz
