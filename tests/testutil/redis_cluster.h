// A real Redis Cluster on loopback for tests: six `redis-server --cluster-enabled yes` (three
// masters, three replicas) on free ports in a temp folder, joined with
// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`; killed and removed when
// the object goes. Also a single non-cluster redis-server. Faults are real: kill a node,
// SIGSTOP it, or write a value with redis-cli. Without redis-server or redis-cli, Available()
// is false and tests skip (exit 125).
#ifndef KCACHE_TESTS_TESTUTIL_REDIS_CLUSTER_H_
#define KCACHE_TESTS_TESTUTIL_REDIS_CLUSTER_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/testutil/http.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::testing {

inline bool RedisAvailable() {
  return Run("command -v redis-server && command -v redis-cli").exit_code == 0;
}

// A loopback port that nothing listens on for as long as this object lives: it holds the port
// bound (without SO_REUSEADDR, never listening), so a connect is refused and no other process,
// such as a test's redis-server started meanwhile, can take it.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(addr);
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~ClosedPort() {
    if (fd_ >= 0) close(fd_);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;

  int port() const { return port_; }  // 0 when no port could be held

 private:
  int fd_ = -1;
  int port_ = 0;
};

// One line of `CLUSTER NODES`.
struct RedisNodeInfo {
  std::string id;
  int port = 0;
  bool master = false;
  bool failed = false;
  std::string master_id;                   // for a replica
  std::vector<std::pair<int, int>> slots;  // ranges served (a master)
};

class RedisServers {
 public:
  RedisServers() = default;
  RedisServers(const RedisServers&) = delete;
  RedisServers& operator=(const RedisServers&) = delete;
  ~RedisServers() {
    for (auto& [port, pid] : pids_) {
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  // Starts a plain redis-server. False when it did not answer PING.
  bool StartSingle() { return StartNode(false) > 0; }

  // Starts six cluster nodes and joins them; false (with the reason in error()) on failure.
  bool StartCluster() {
    std::string create = "redis-cli --cluster create";
    for (int i = 0; i < 6; ++i) {
      int port = StartNode(true);
      if (port <= 0) return false;
      create += " 127.0.0.1:" + std::to_string(port);
    }
    RunResult joined = Run(create + " --cluster-replicas 1 --cluster-yes");
    if (joined.exit_code != 0) {
      error_ = joined.output;
      return false;
    }
    return WaitClusterOk(/*replicas_per_master=*/1);
  }

  // Waits (up to 60 s) until every live node says cluster_state:ok and, when
  // `replicas_per_master` > 0, every node's CLUSTER NODES names that many replicas for each
  // master that serves slots: `--cluster create` returns before the replica roles have
  // spread by gossip, and a test that picks a master's replica needs every node to know it.
  bool WaitClusterOk(int replicas_per_master = 0) {
    for (int i = 0; i < 600; ++i) {
      bool ok = true;
      for (int port : LivePorts()) {
        ok = ok && Contains(Cli(port, "cluster info"), "cluster_state:ok") &&
             (replicas_per_master == 0 || EveryMasterHasReplicas(port, replicas_per_master));
      }
      if (ok) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    error_ = replicas_per_master ? "cluster_state never became ok with every replica known"
                                 : "cluster_state never became ok";
    return false;
  }

  std::string Cli(int port, const std::string& args) const {
    return Run("redis-cli -p " + std::to_string(port) + " " + args).output;
  }

  // "redis://127.0.0.1:P" for a single server; "redis-cluster://127.0.0.1:P1,..." (the
  // first two nodes as seeds) for a cluster.
  std::string Url() const {
    if (ports_.size() == 1) return "redis://127.0.0.1:" + std::to_string(ports_[0]);
    return "redis-cluster://127.0.0.1:" + std::to_string(ports_[0]) +
           ",127.0.0.1:" + std::to_string(ports_[1]);
  }

  std::vector<RedisNodeInfo> Nodes(int ask_port = 0) const {
    std::vector<RedisNodeInfo> nodes;
    std::istringstream lines(Cli(ask_port ? ask_port : LivePorts().front(), "cluster nodes"));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      RedisNodeInfo node;
      std::string address, flags, master;
      if (!(fields >> node.id >> address >> flags >> master)) continue;
      node.port = std::stoi(address.substr(address.find(':') + 1, address.find('@')));
      node.master = Contains(flags, "master");
      node.failed = Contains(flags, "fail");
      node.master_id = master;
      std::string field;
      for (int skip = 0; skip < 4 && fields >> field; ++skip) {
      }  // ping-sent pong-recv config-epoch link-state
      while (fields >> field) {
        if (field.empty() || field[0] == '[') continue;  // a migration in progress
        size_t dash = field.find('-');
        int first = std::stoi(field.substr(0, dash));
        int last = dash == std::string::npos ? first : std::stoi(field.substr(dash + 1));
        node.slots.emplace_back(first, last);
      }
      nodes.push_back(node);
    }
    return nodes;
  }
  RedisNodeInfo NodeOnPort(int port) const {
    for (const RedisNodeInfo& node : Nodes()) {
      if (node.port == port) return node;
    }
    return {};
  }
  // The port of the master serving `slot`, from CLUSTER NODES (0 when none).
  int MasterOfSlot(int slot) const {
    for (const RedisNodeInfo& node : Nodes()) {
      for (auto [first, last] : node.slots) {
        if (node.master && slot >= first && slot <= last) return node.port;
      }
    }
    return 0;
  }

  void Kill(int port) { Signal(port, SIGKILL, true); }
  void Pause(int port) { Signal(port, SIGSTOP, false); }
  void Resume(int port) { Signal(port, SIGCONT, false); }

  const std::vector<int>& ports() const { return ports_; }
  std::vector<int> LivePorts() const {
    std::vector<int> live;
    for (int port : ports_) {
      if (pids_.count(port)) live.push_back(port);
    }
    return live;
  }
  const std::string& error() const { return error_; }

 private:
  // Whether the node on `port` sees `count` replicas of every master that serves slots.
  bool EveryMasterHasReplicas(int port, int count) const {
    std::vector<RedisNodeInfo> nodes = Nodes(port);
    for (const RedisNodeInfo& master : nodes) {
      if (!master.master || master.slots.empty()) continue;
      int replicas = 0;
      for (const RedisNodeInfo& node : nodes) replicas += node.master_id == master.id;
      if (replicas < count) return false;
    }
    return true;
  }

  // A server's port in [10000, 17000), its cluster bus (+10000) in [20000, 27000): below the
  // ephemeral range and apart from a kcached's (FreePort, tests/testutil/http.h).
  int FreePort() {
    for (int i = 0; i < 200; ++i) {
      int port = FreePortIn(10000, 17000);
      if (port != 0 && PortFree(port + 10000)) return port;
    }
    return 0;
  }

  int StartNode(bool cluster) {
    int port = FreePort();
    std::string dir = dir_ / std::to_string(port);
    Run("mkdir -p " + dir);
    std::vector<std::string> args = {
        "redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--dir",     dir,
        "--save",       "",       "--appendonly",       "no",     "--logfile", dir + "/log"};
    if (cluster) {
      for (const char* arg : {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                              "--cluster-node-timeout", "1000"}) {
        args.push_back(arg);
      }
    }
    pid_t pid = fork();
    if (pid == 0) {
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    pids_[port] = pid;
    ports_.push_back(port);
    for (int i = 0; i < 200; ++i) {
      if (Contains(Cli(port, "ping"), "PONG")) return port;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    error_ = "redis-server on port " + std::to_string(port) + " did not answer";
    return 0;
  }

  void Signal(int port, int signal, bool reap) {
    auto it = pids_.find(port);
    if (it == pids_.end()) return;
    kill(it->second, signal);
    if (reap) {
      waitpid(it->second, nullptr, 0);
      pids_.erase(it);
    }
  }

  TempDir dir_;
  std::vector<int> ports_;
  std::map<int, pid_t> pids_;
  std::string error_;
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_REDIS_CLUSTER_H_
