#pragma once

// A real etcd cluster on hosts of the cluster tests' network (docs/cluster.md): one member per
// host e1, e2, ... (10.213.0.21...), clients on port 2379 and peers on 2380 of each host's
// address, short raft timings (50 ms heartbeats, 500 ms elections) so that a new leader is found
// within a second. Members can be killed and started again on their data; etcdctl, run inside a
// given host, finds the leader and writes keys. Blocking calls: plain threads, or fibers through
// tern::io::offload.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "host_process.h"
#include "netns.h"

namespace cluster_test {

class EtcdCluster {
 public:
  // Why the cluster cannot run here ("" when it can): etcd or etcdctl not installed.
  static std::string unavailable();

  // Adds `members` hosts to `network` and starts a member on each; started() says whether all
  // of them came up, and `why` what failed.
  EtcdCluster(Network& network, int members, std::string* why);
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  bool started() const noexcept { return started_; }
  // "10.213.0.21:2379,10.213.0.22:2379,...", as etcd:// targets and server registration take it.
  std::string endpoints() const;
  std::size_t size() const noexcept { return hosts_.size(); }
  const Host& host(std::size_t index) const { return *hosts_.at(index); }

  // SIGKILLs member `index` (its data stays).
  void kill(std::size_t index);
  // Starts member `index` again on its data and waits until it serves; false (with the log's
  // tail in `why`) if it does not within 20 s.
  bool start(std::size_t index, std::string* why);
  // The index of the member that is leader now, as seen from host `from`, or -1 when no
  // running member knows of a leader.
  int leader(const Host& from) const;
  // Writes key=value through etcdctl from host `from`; whether the cluster accepted it within
  // `timeout` (it cannot without a quorum).
  bool put(const Host& from, const std::string& key, const std::string& value,
           std::chrono::milliseconds timeout) const;

 private:
  std::vector<std::string> member_argv(std::size_t index) const;

  Network& network_;
  std::vector<const Host*> hosts_;
  std::vector<std::unique_ptr<HostProcess>> members_;
  bool started_ = false;
};

}  // namespace cluster_test
