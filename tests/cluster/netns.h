#pragma once

// The multi-host harness of the cluster tests (docs/cluster.md): network namespaces as hosts,
// each joined by a veth pair to one bridge that lives in a namespace of its own, with an address
// in 10.213.0.0/24, a subnet that exists only inside these namespaces. Nothing is added to the
// machine's own namespace but the namespace names. Every namespace of a run is named
// "tcl<pid>-<host>", so a run removes what a crashed earlier run left behind (its pid is gone)
// and never touches a run going on beside it. Used from the test's main thread (or a fiber that
// may block its worker briefly: each step runs the `ip` command).

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace cluster_test {

// Why network namespaces cannot be made here ("" when they can): not root, no CAP_NET_ADMIN,
// no `ip` command. Probes by making and removing one namespace. Any thread.
std::string netns_unavailable();

// One simulated host: a network namespace with one interface, eth0, on the bridge.
struct Host {
  std::string name;     // "s1"
  std::string netns;    // "tcl1234-s1"
  std::string address;  // "10.213.0.11"
};

// A set of hosts on one bridge; removes every namespace it made (and kills what runs in them)
// when destroyed. From one thread at a time.
class Network {
 public:
  // Creates the bridge's namespace after removing leftovers of dead runs; `why` says what failed.
  static std::unique_ptr<Network> create(std::string* why);
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;
  ~Network();

  // Adds host `name` with address 10.213.0.<octet> (the octet must be unique, 1-254); nullptr on
  // failure, with the reason in `why`.
  const Host* add_host(const std::string& name, int octet, std::string* why);
  // Takes the host's link down (the bridge stops delivering its packets both ways, as when a
  // cable is pulled: no reset reaches anyone) or brings it back up. Returns whether `ip`
  // succeeded.
  bool set_link(const Host& host, bool up);
  // The argv that runs `args` inside the host's namespace (`ip netns exec`, which execs in place:
  // the spawned pid is the program's).
  std::vector<std::string> in_host(const Host& host, std::vector<std::string> args) const;
  // This run's directory for logs and data (removed with the network unless a test failed).
  const std::string& work_dir() const noexcept { return work_dir_; }
  // Keeps work_dir() after the network is gone (a test failed: its logs explain why).
  void keep_work_dir() noexcept { keep_work_dir_ = true; }

 private:
  Network() = default;

  std::string prefix_;
  std::string bridge_ns_;
  std::string work_dir_;
  bool keep_work_dir_ = false;
  std::vector<std::unique_ptr<Host>> hosts_;
};

// Moves the calling thread into a host's namespace for its lifetime, and back when destroyed:
// sockets it opens, and the threads it starts (a tern::Runtime's workers), live in that host. The
// thread that constructs it must destroy it.
class EnterHost {
 public:
  explicit EnterHost(const Host& host);
  EnterHost(const EnterHost&) = delete;
  EnterHost& operator=(const EnterHost&) = delete;
  ~EnterHost();
  // Whether the thread is inside the host now.
  bool entered() const noexcept { return entered_; }

 private:
  int home_ = -1;
  bool entered_ = false;
};

// Runs `ip` with `args` (or any program when args[0] is a path), waiting up to `limit`; returns
// its exit status (-1 when it could not start or timed out) with its output in `output`. Plain
// threads, or briefly from a fiber.
int run_command(const std::vector<std::string>& args, std::string* output = nullptr,
                std::chrono::milliseconds limit = std::chrono::seconds(10));

}  // namespace cluster_test
