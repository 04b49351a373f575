// Writes the seed corpus of address_fuzz (tests/fuzz/corpus/address) into the directory given:
// one file per form Address::parse takes ("ok-*") and per way to get it wrong ("bad-*").
// The checked-in seeds were made with: address_seeds tests/fuzz/corpus/address
#include <string>

#include "seed_files.h"

int main(int argc, char** argv) {
  using namespace std::string_literals;
  const std::string longest_path(106, 'p');      // with "/" and the NUL: all 108 bytes of sun_path
  const std::string longest_abstract(107, 'n');  // with the leading NUL: all 108 bytes
  const std::vector<tern::fuzz::Seed> seeds = {
      {"ok-ipv4", "127.0.0.1:8080"},
      {"ok-ipv4-any-star", "*:80"},
      {"ok-ipv4-any-empty", ":0"},
      {"ok-ipv4-scheme", "tcp://10.0.0.1:65535"},
      {"ok-ipv4-port-zeros", "192.0.2.7:00080"},
      {"ok-ipv6-loopback", "[::1]:80"},
      {"ok-ipv6-full", "[2001:db8:0:0:1:0:0:1]:443"},
      {"ok-ipv6-mapped", "[::ffff:192.0.2.1]:7000"},
      {"ok-ipv6-scheme", "tcp://[fe80::1]:1"},
      {"ok-ipv6-any", "[::]:0"},
      {"ok-unix-path", "unix:/run/tern.sock"},
      {"ok-unix-relative", "unix:tern.sock"},
      {"ok-unix-abstract", "unix:@tern"},
      {"ok-unix-abstract-binary", "unix:@a\0b\xff"s},
      {"ok-unix-longest-path", "unix:/" + longest_path},
      {"ok-unix-longest-abstract", "unix:@" + longest_abstract},
      {"bad-empty", ""},
      {"bad-host-name", "localhost:80"},
      {"bad-no-port", "192.0.2.7"},
      {"bad-port-empty", "192.0.2.7:"},
      {"bad-port-range", "192.0.2.7:65536"},
      {"bad-port-sign", "192.0.2.7:+80"},
      {"bad-ipv4-octet", "256.1.1.1:80"},
      {"bad-ipv4-short", "10.1:80"},
      {"bad-ipv6-no-brackets", "::1:80"},
      {"bad-ipv6-no-port", "[::1]"},
      {"bad-ipv6-scope", "[fe80::1%eth0]:80"},
      {"bad-ipv6-unclosed", "[::1:80"},
      {"bad-scheme", "udp://192.0.2.7:80"},
      {"bad-scheme-twice", "tcp://tcp://192.0.2.7:80"},
      {"bad-unix-empty", "unix:"},
      {"bad-unix-abstract-empty", "unix:@"},
      {"bad-unix-too-long", "unix:/" + longest_path + "p"},
      {"bad-unix-abstract-too-long", "unix:@" + longest_abstract + "n"},
      // Found by address_fuzz: accepted, though the kernel would bind "/run/tern" (or, with the
      // NUL first, an abstract name).
      {"bad-unix-nul-in-path", "unix:/run/tern\0.sock"s},
      {"bad-unix-nul-first", "unix:\0tern"s},
  };
  return tern::fuzz::write_seed_files(argc, argv, seeds);
}
