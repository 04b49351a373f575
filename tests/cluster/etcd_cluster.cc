// EtcdCluster: etcd members started with `ip netns exec`, queried with etcdctl.
#include "etcd_cluster.h"

#include <unistd.h>

#include <filesystem>

#include "nlohmann/json.hpp"

namespace cluster_test {

namespace {

using namespace std::chrono_literals;

constexpr int kFirstOctet = 21;
constexpr const char* kReady = "ready to serve client requests";

bool on_path(const std::string& program) {
  std::string output;
  return run_command({"sh", "-c", "command -v " + program}, &output) == 0;
}

}  // namespace

std::string EtcdCluster::unavailable() {
  if (!on_path("etcd") || !on_path("etcdctl")) {
    return "etcd or etcdctl is not installed (scripts/setup installs etcd-server and etcd-client)";
  }
  return "";
}

EtcdCluster::EtcdCluster(Network& network, int members, std::string* why) : network_(network) {
  for (int i = 0; i < members; ++i) {
    const Host* host = network_.add_host("e" + std::to_string(i + 1), kFirstOctet + i, why);
    if (host == nullptr) return;
    hosts_.push_back(host);
  }
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    members_.push_back(
        std::make_unique<HostProcess>(network_.in_host(*hosts_[i], member_argv(i)),
                                      network_.work_dir() + "/" + hosts_[i]->name + ".log"));
  }
  // A member is ready once the cluster has a leader, so all of them start before any is waited
  // for.
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (!members_[i]->wait_for_output(kReady, 30s)) {
      *why = hosts_[i]->name + " did not become ready: " + members_[i]->log();
      return;
    }
  }
  started_ = true;
}

std::vector<std::string> EtcdCluster::member_argv(std::size_t index) const {
  std::string initial;
  for (const Host* host : hosts_) {
    initial += (initial.empty() ? "" : ",") + host->name + "=http://" + host->address + ":2380";
  }
  const Host& host = *hosts_[index];
  const std::string client = "http://" + host.address + ":2379";
  const std::string peer = "http://" + host.address + ":2380";
  return {
      "etcd",
      "--name=" + host.name,
      "--data-dir=" + network_.work_dir() + "/" + host.name + ".etcd",
      "--listen-client-urls=" + client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=" + initial,
      "--initial-cluster-state=new",
      "--initial-cluster-token=" + std::filesystem::path(network_.work_dir()).filename().string(),
      "--heartbeat-interval=50",
      "--election-timeout=500"};
}

std::string EtcdCluster::endpoints() const {
  std::string list;
  for (const Host* host : hosts_) list += (list.empty() ? "" : ",") + host->address + ":2379";
  return list;
}

void EtcdCluster::kill(std::size_t index) { members_.at(index)->kill(); }

bool EtcdCluster::start(std::size_t index, std::string* why) {
  auto& member = members_.at(index);
  member->kill();
  const std::size_t from = member->log().size();
  member = std::make_unique<HostProcess>(network_.in_host(*hosts_[index], member_argv(index)),
                                         network_.work_dir() + "/" + hosts_[index]->name + ".log");
  if (member->wait_for_output(kReady, 20s, from)) return true;
  *why = hosts_[index]->name + " did not come back: " + member->log().substr(from);
  return false;
}

int EtcdCluster::leader(const Host& from) const {
  std::string output;
  const int status = run_command(
      network_.in_host(from, {"etcdctl", "--endpoints=" + endpoints(), "--dial-timeout=300ms",
                              "--command-timeout=500ms", "endpoint", "status", "-w", "json"}),
      &output);
  // etcdctl exits non-zero when some endpoint did not answer but prints the others.
  (void)status;
  const std::size_t start = output.find('[');
  if (start == std::string::npos) return -1;
  const nlohmann::json statuses =
      nlohmann::json::parse(output.substr(start), nullptr, /*allow_exceptions=*/false);
  if (!statuses.is_array()) return -1;
  for (const nlohmann::json& entry : statuses) {
    const nlohmann::json& state = entry.value("Status", nlohmann::json::object());
    const auto leader = state.value("leader", std::uint64_t{0});
    if (leader == 0) continue;
    for (const nlohmann::json& other : statuses) {
      const nlohmann::json& other_state = other.value("Status", nlohmann::json::object());
      const nlohmann::json& header = other_state.value("header", nlohmann::json::object());
      if (header.value("member_id", std::uint64_t{0}) != leader) continue;
      const std::string endpoint = other.value("Endpoint", std::string());
      for (std::size_t i = 0; i < hosts_.size(); ++i) {
        if (endpoint.find(hosts_[i]->address + ":") != std::string::npos) {
          return static_cast<int>(i);
        }
      }
    }
  }
  return -1;
}

bool EtcdCluster::put(const Host& from, const std::string& key, const std::string& value,
                      std::chrono::milliseconds timeout) const {
  return run_command(network_.in_host(
                         from, {"etcdctl", "--endpoints=" + endpoints(), "--dial-timeout=300ms",
                                "--command-timeout=" + std::to_string(timeout.count()) + "ms",
                                "put", key, value}),
                     nullptr, timeout + 2s) == 0;
}

}  // namespace cluster_test
