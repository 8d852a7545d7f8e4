// A real kcached process for tests: started on a temp unix socket with a temp store, waited
// for until it answers the standard health check, stopped (SIGTERM, then SIGKILL) when the
// object goes away. The binary is $KCACHED (set by ctest), else the build tree's kcached.
//
//   kcache::testing::DaemonProcess daemon;                 // picks paths, starts nothing
//   auto store = kcache::OpenStore(daemon.store_path());   // optional: fill the store first
//   ... store.reset();                                     // (the daemon opens it itself)
//   ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
//   auto channel = grpc::CreateChannel(daemon.address(), grpc::InsecureChannelCredentials());
//
// Start() waits for a health answer on the socket, so to watch a daemon refuse to start on a
// socket another one serves, use Spawn() and Wait() instead.
// Not thread-safe: one test thread drives it. Start() may be called again after the process
// exited (Kill + Wait), on the same socket and store.
#ifndef KCACHE_TESTS_TESTUTIL_DAEMON_PROCESS_H_
#define KCACHE_TESTS_TESTUTIL_DAEMON_PROCESS_H_

#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

extern char** environ;

namespace kcache::testing {

// The kcached binary under test (ctest sets KCACHED).
inline std::string KcachedBinary() {
  const char* path = std::getenv("KCACHED");
  return path != nullptr && *path != '\0' ? path : BinaryPath("daemon/kcached");
}

// grpc.health.v1.HealthCheckResponse.ServingStatus values.
enum class HealthStatus : int { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// Calls grpc.health.v1.Health/Check on `address` ("unix:///path" or "127.0.0.1:port") for
// `service` ("" = the whole server) with a deadline. Written against the generic stub because
// Debian ships no health.proto: the request is field 1 (string), the answer field 1 (enum).
inline absl::StatusOr<HealthStatus> CheckHealth(
    const std::string& address, const std::string& service = "",
    std::chrono::milliseconds deadline = std::chrono::milliseconds(1000)) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);
    request.push_back(static_cast<char>(service.size()));  // names under 128 bytes
    request += service;
  }
  grpc::Slice slice(request.data(), request.size());
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request_buffer,
                 &response_buffer, [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    return absl::UnavailableError("health check on " + address +
                                  " failed: " + status.error_message() + " (code " +
                                  std::to_string(status.error_code()) + ")");
  }
  std::vector<grpc::Slice> slices;
  if (!response_buffer.Dump(&slices).ok()) return absl::InternalError("unreadable health answer");
  std::string response;
  for (const grpc::Slice& s : slices) {
    response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (response.empty()) return HealthStatus::kUnknown;
  if (response.size() != 2 || response[0] != 0x08) {
    return absl::InternalError("unexpected health answer of " + std::to_string(response.size()) +
                               " bytes");
  }
  return static_cast<HealthStatus>(response[1]);
}

struct DaemonOptions {
  std::string store;                     // --store; "" = <temp dir>/store
  std::vector<std::string> baked;        // --baked, in order (read-only stores)
  std::string socket;                    // unix socket path; "" = <temp dir>/kcache.sock
  std::vector<std::string> extra_flags;  // anything else, e.g. {"--no-toolkit"}
  std::chrono::milliseconds start_timeout = std::chrono::seconds(30);
};

class DaemonProcess {
 public:
  explicit DaemonProcess(DaemonOptions options = {}) : options_(std::move(options)) {
    if (options_.store.empty()) options_.store = dir_ / "store";
    if (options_.socket.empty()) options_.socket = dir_ / "kcache.sock";
    log_path_ = dir_ / "kcached.log";
  }
  ~DaemonProcess() { Stop(); }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Spawns kcached and waits until its health check answers SERVING on the socket. On failure
  // (exited, or no answer within start_timeout) the process is killed and the error carries
  // its log.
  absl::Status Start() {
    if (absl::Status s = Spawn(); !s.ok()) return s;
    return WaitUntilServing();
  }

  // Starts the process without waiting for it (e.g. to watch it refuse to start: Wait()).
  absl::Status Spawn() {
    if (pid_ > 0) return absl::FailedPreconditionError("kcached is already running");
    std::vector<std::string> args = {KcachedBinary(), "--store", options_.store, "--listen",
                                     address()};
    for (const std::string& baked : options_.baked) {
      args.push_back("--baked");
      args.push_back(baked);
    }
    args.insert(args.end(), options_.extra_flags.begin(), options_.extra_flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      return absl::InternalError("cannot start " + args[0] + ": " + std::strerror(rc) +
                                 "; build the kcached target or set KCACHED");
    }
    pid_ = pid;
    exit_code_.reset();
    return absl::OkStatus();
  }

  // Waits until the health check answers SERVING (see Start).
  absl::Status WaitUntilServing() {
    auto give_up = std::chrono::steady_clock::now() + options_.start_timeout;
    std::string last_error;
    while (std::chrono::steady_clock::now() < give_up) {
      if (!Running()) {
        return absl::InternalError("kcached exited with " +
                                   std::to_string(exit_code_.value_or(-1)) +
                                   " during start-up; its log:\n" + Log());
      }
      auto health = CheckHealth(address(), "", std::chrono::milliseconds(500));
      if (health.ok() && *health == HealthStatus::kServing) return absl::OkStatus();
      last_error = health.ok() ? "status " + std::to_string(static_cast<int>(*health))
                               : std::string(health.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Kill(SIGKILL);
    Wait();
    return absl::DeadlineExceededError("kcached did not answer health within the start timeout (" +
                                       last_error + "); its log:\n" + Log());
  }

  // Sends `signal` to the daemon (no-op when it is not running).
  void Kill(int signal) {
    if (pid_ > 0) ::kill(pid_, signal);
  }

  // SIGSTOP, then waits (up to a second) until the process shows as stopped ('T' in
  // /proc/PID/stat: the signal is delivered asynchronously). False when it did not stop.
  bool Pause() {
    Kill(SIGSTOP);
    std::string stat_path = "/proc/" + std::to_string(pid_) + "/stat";
    for (int i = 0; i < 500; ++i) {
      std::ifstream in(stat_path);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      size_t paren = text.rfind(')');
      if (paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'T') {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // True while the process has not exited (reaps it when it has).
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == 0) return true;
    Reap(status);
    return false;
  }

  // Waits for the process to exit, up to `timeout`. Returns its exit code (128 + signal when
  // a signal ended it), or -1 when it still runs after `timeout` (it is left running).
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    auto give_up = std::chrono::steady_clock::now() + timeout;
    while (Running()) {
      if (std::chrono::steady_clock::now() >= give_up) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_code_.value_or(-1);
  }

  // SIGTERM, then SIGKILL after `grace`; returns the exit code (see Wait).
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10)) {
    if (!Running()) return exit_code_.value_or(-1);
    Kill(SIGTERM);
    int code = Wait(grace);
    if (code == -1) {
      Kill(SIGKILL);
      code = Wait();
    }
    return code;
  }

  // Everything kcached wrote to stdout and stderr (across restarts).
  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string address() const { return "unix://" + options_.socket; }
  const std::string& socket_path() const { return options_.socket; }
  const std::string& store_path() const { return options_.store; }
  const std::string& dir() const { return dir_.path(); }  // temp dir: store, socket, log
  pid_t pid() const { return pid_; }
  std::optional<int> exit_code() const { return exit_code_; }
  DaemonOptions& options() { return options_; }  // edit between Stop() and Start()

 private:
  void Reap(int status) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = 0;
  }

  TempDir dir_;
  DaemonOptions options_;
  std::string log_path_;
  pid_t pid_ = 0;
  std::optional<int> exit_code_;
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_DAEMON_PROCESS_H_
