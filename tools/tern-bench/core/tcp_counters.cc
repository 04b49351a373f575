#include "core/tcp_counters.h"

#include <array>
#include <sstream>
#include <system_error>
#include <vector>

#include "core/proc_file.h"

namespace tern::bench {

namespace {

constexpr std::array<std::string_view, 4> kKept = {"ListenOverflows", "ListenDrops",
                                                   "TCPSynRetrans", "TCPTimeouts"};

std::vector<std::string> words_of(std::string_view line) {
  std::istringstream in{std::string(line)};
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

}  // namespace

TcpCounters TcpCounters::read() {
  Result<std::string> text =
      read_whole_file("/proc/net/netstat", std::errc::no_such_file_or_directory);
  return text ? parse(*text) : TcpCounters{};
}

TcpCounters TcpCounters::parse(std::string_view netstat) {
  TcpCounters counters;
  std::vector<std::string> names;
  while (!netstat.empty()) {
    const std::size_t end = netstat.find('\n');
    const std::string_view line = netstat.substr(0, end);
    netstat = end == std::string_view::npos ? std::string_view() : netstat.substr(end + 1);
    if (!line.starts_with("TcpExt:")) continue;
    std::vector<std::string> words = words_of(line.substr(7));
    if (names.empty()) {  // the names line comes first, then the values line
      names = std::move(words);
      continue;
    }
    for (std::size_t i = 0; i < names.size() && i < words.size(); ++i) {
      for (std::string_view kept : kKept) {
        if (names[i] == kept) counters.values[names[i]] = std::stoull(words[i]);
      }
    }
    names.clear();
  }
  return counters;
}

std::uint64_t TcpCounters::since(const TcpCounters& before, const std::string& name) const {
  const auto now = values.find(name);
  const auto then = before.values.find(name);
  if (now == values.end() || then == before.values.end() || now->second < then->second) return 0;
  return now->second - then->second;
}

}  // namespace tern::bench
