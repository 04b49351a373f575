#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace tern::bench {

// The machine's TCP counters that tell a connect dropped by a full listen queue from one that
// only waited: ListenOverflows, ListenDrops, TCPSynRetrans and TCPTimeouts of /proc/net/netstat's
// TcpExt lines. They count every process's connections (on an idle machine, the run's).
struct TcpCounters {
  std::map<std::string, std::uint64_t> values;  // by TcpExt name; empty when unreadable

  // Reads the counters now; empty values when /proc/net/netstat cannot be read. Any thread.
  static TcpCounters read();
  // Parses the text of /proc/net/netstat (pairs of "TcpExt: names" and "TcpExt: values"
  // lines); keeps only the counters named above. Any thread.
  static TcpCounters parse(std::string_view netstat);
  // How much `name` grew from `before` to this reading (0 when either lacks it). Any thread.
  std::uint64_t since(const TcpCounters& before, const std::string& name) const;
};

}  // namespace tern::bench
