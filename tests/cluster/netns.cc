// The namespaces, veth pairs and bridge of the cluster tests, made and removed with `ip`.
#include "netns.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace cluster_test {

namespace {

constexpr const char* kNamePrefix = "tcl";
constexpr const char* kSubnet = "10.213.0.";

std::string join(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& arg : args) text += (text.empty() ? "" : " ") + arg;
  return text;
}

// Every namespace of the machine (the first word of each line of `ip netns list`).
std::vector<std::string> list_namespaces() {
  std::string output;
  std::vector<std::string> names;
  if (run_command({"ip", "netns", "list"}, &output) != 0) return names;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

// Kills every process inside namespace `name`, then removes it.
void remove_namespace(const std::string& name) {
  std::string pids;
  if (run_command({"ip", "netns", "pids", name}, &pids) == 0) {
    std::istringstream words(pids);
    for (pid_t pid; words >> pid;) ::kill(pid, SIGKILL);
  }
  (void)run_command({"ip", "netns", "del", name});
}

// The pid in a name "tcl<pid>n<k>-<host>", or 0 when the name is not one of this harness's.
pid_t owner_of(const std::string& name) {
  if (name.rfind(kNamePrefix, 0) != 0) return 0;
  const char* digits = name.c_str() + std::string_view(kNamePrefix).size();
  char* end = nullptr;
  const long pid = std::strtol(digits, &end, 10);
  if (end == digits || *end != 'n' || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

// Whether process `pid` is still running (not gone, not a zombie waiting to be reaped).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const std::size_t after_name = line.rfind(')');
  return after_name == std::string::npos || line.compare(after_name, 3, ") Z") != 0;
}

// Removes the namespaces of runs whose process is gone (a run that crashed before its cleanup).
void remove_leftovers() {
  for (const std::string& name : list_namespaces()) {
    const pid_t owner = owner_of(name);
    if (owner == 0 || owner == ::getpid() || alive(owner)) continue;
    std::fprintf(stderr, "cluster harness: removing %s, left by a run that died\n", name.c_str());
    remove_namespace(name);
  }
}

}  // namespace

int run_command(const std::vector<std::string>& args, std::string* output,
                std::chrono::milliseconds limit) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return -1;
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    if (output != nullptr) *output = "cannot start " + args[0];
    return -1;
  }
  std::string text;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd readable = {.fd = out[0], .events = POLLIN, .revents = 0};
    if (::poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) *output = std::move(text);
  if (timed_out || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::string netns_unavailable() {
  if (::geteuid() != 0) return "network namespaces need root (CAP_NET_ADMIN); not running as root";
  const std::string probe = std::string(kNamePrefix) + std::to_string(::getpid()) + "n0-probe";
  std::string output;
  if (run_command({"ip", "netns", "add", probe}, &output) != 0) {
    return "`ip netns add` fails here: " + output;
  }
  (void)run_command({"ip", "netns", "del", probe});
  return "";
}

std::unique_ptr<Network> Network::create(std::string* why) {
  static std::atomic<int> sequence{0};
  remove_leftovers();
  std::unique_ptr<Network> network(new Network);
  const std::string run =
      std::string(kNamePrefix) + std::to_string(::getpid()) + "n" + std::to_string(++sequence);
  network->prefix_ = run + "-";
  std::string dir = (std::filesystem::temp_directory_path() / ("tern-cluster-" + run)).string();
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  if (!std::filesystem::create_directories(dir, error)) {
    *why = "cannot create " + dir + ": " + error.message();
    return nullptr;
  }
  network->work_dir_ = dir;
  network->bridge_ns_ = network->prefix_ + "br";
  const std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "add", network->bridge_ns_},
      {"ip", "-n", network->bridge_ns_, "link", "add", "br0", "type", "bridge"},
      {"ip", "-n", network->bridge_ns_, "link", "set", "br0", "up"},
  };
  for (const std::vector<std::string>& step : steps) {
    std::string output;
    if (run_command(step, &output) != 0) {
      *why = "`" + join(step) + "` failed: " + output;
      return nullptr;
    }
  }
  return network;
}

Network::~Network() {
  for (const std::unique_ptr<Host>& host : hosts_) remove_namespace(host->netns);
  if (!bridge_ns_.empty()) remove_namespace(bridge_ns_);
  if (!keep_work_dir_ && !work_dir_.empty()) {
    std::error_code error;
    std::filesystem::remove_all(work_dir_, error);
  } else if (!work_dir_.empty()) {
    std::fprintf(stderr, "cluster harness: logs kept in %s\n", work_dir_.c_str());
  }
}

const Host* Network::add_host(const std::string& name, int octet, std::string* why) {
  auto host = std::make_unique<Host>();
  host->name = name;
  host->netns = prefix_ + name;
  host->address = kSubnet + std::to_string(octet);
  const std::string bridge_end = "v" + std::to_string(octet);
  const std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "add", host->netns},
      {"ip", "-n", bridge_ns_, "link", "add", bridge_end, "type", "veth", "peer", "name", "eth0",
       "netns", host->netns},
      {"ip", "-n", bridge_ns_, "link", "set", bridge_end, "master", "br0", "up"},
      {"ip", "-n", host->netns, "addr", "add", host->address + "/24", "dev", "eth0"},
      {"ip", "-n", host->netns, "link", "set", "eth0", "up"},
      {"ip", "-n", host->netns, "link", "set", "lo", "up"},
  };
  // Listed now, so that the destructor removes the namespace even if a later step fails.
  hosts_.push_back(std::move(host));
  const Host& added = *hosts_.back();
  for (const std::vector<std::string>& step : steps) {
    std::string output;
    if (run_command(step, &output) != 0) {
      *why = "`" + join(step) + "` failed: " + output;
      return nullptr;
    }
  }
  return &added;
}

bool Network::set_link(const Host& host, bool up) {
  return run_command({"ip", "-n", host.netns, "link", "set", "eth0", up ? "up" : "down"}) == 0;
}

std::vector<std::string> Network::in_host(const Host& host, std::vector<std::string> args) const {
  std::vector<std::string> argv = {"ip", "netns", "exec", host.netns};
  argv.insert(argv.end(), std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end()));
  return argv;
}

EnterHost::EnterHost(const Host& host) {
  home_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = ::open(("/run/netns/" + host.netns).c_str(), O_RDONLY | O_CLOEXEC);
  if (home_ >= 0 && target >= 0) entered_ = ::setns(target, CLONE_NEWNET) == 0;
  if (target >= 0) ::close(target);
}

EnterHost::~EnterHost() {
  if (entered_) (void)::setns(home_, CLONE_NEWNET);
  if (home_ >= 0) ::close(home_);
}

}  // namespace cluster_test
