// kcache doctor: checks what a machine needs to build, serve and load kernels (CUDA toolkits,
// the driver and its GPUs, stores, a running kcached) and says how to fix each problem
// (docs/doctor.md). The checks (doctor_checks.cc) only read: a store is opened read-only,
// the driver and toolkits are dlopen'd, a daemon is asked for its statistics. doctor.cc
// prints their reports and registers the subcommand.
#ifndef KCACHE_CLIENT_CLI_DOCTOR_H_
#define KCACHE_CLIENT_CLI_DOCTOR_H_

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/target.h"
#include "engine/compile/toolkit.h"

namespace kcache::cli {

enum class Level { kOk, kInfo, kProblem };
absl::string_view LevelName(Level level);  // "ok", "info", "problem"

struct Finding {
  Level level = Level::kOk;
  std::string text;
  std::string fix;  // set for problems: what to do about it
};

// The findings of one check on one thing.
struct CheckReport {
  CheckReport(std::string check_name, std::string subject_name)
      : check(std::move(check_name)), subject(std::move(subject_name)) {}

  std::string check;              // "toolkit", "gpus", "store", "daemon"
  std::string subject;            // the toolkit root, store path or daemon address; "" for gpus
  std::vector<Finding> findings;  // in the order found
  nlohmann::json details = nlohmann::json::object();  // the numbers behind them, for --json

  void Ok(std::string text) { findings.push_back({Level::kOk, std::move(text), ""}); }
  void Info(std::string text) { findings.push_back({Level::kInfo, std::move(text), ""}); }
  void Problem(std::string text, std::string fix) {
    findings.push_back({Level::kProblem, std::move(text), std::move(fix)});
  }
  int problems() const;
};

// Loads the toolkit at `root`: its NVRTC version, identity, architectures and nvJitLink.
// `from_default` says the root came from $CUDA_HOME or /usr/local/cuda (for the fix).
// Sets *loaded when it loads.
CheckReport CheckToolkit(const std::string& root, bool from_default,
                         std::shared_ptr<const Toolkit>* loaded);

// The other CUDA toolkits installed under `parent` ("/usr/local"): its cuda and cuda-* folders
// that hold include/nvrtc.h, as canonical paths, sorted, without duplicates (cuda is usually a
// link to one of them) and without the one `checked` already names.
std::vector<std::string> OtherToolkitRoots(const std::string& parent, const std::string& checked);

// The CUDA driver (dlopen'd, never linked) and every GPU it sees, each checked against the
// loaded `toolkits`. No driver or no GPU is information, or a problem with `require_gpu`.
CheckReport CheckGpus(bool require_gpu,
                      const std::vector<std::shared_ptr<const Toolkit>>& toolkits);

// What this kernel offers to sandbox compile workers (Landlock, seccomp, user namespaces).
// Without Landlock and seccomp it is a problem: kcached then refuses sources that clients
// send (unless --allow-unsandboxed-compiles) and `kcache warm --store` refuses to run.
CheckReport CheckSandbox();

// Opens the store at `path` read-only (safe beside a daemon that holds it) and verifies
// every value's checksums (Store::Verify). With `repair`, first repairs it (RepairStore: it
// must not be open elsewhere), as kcached does for its writable store, and reports what that
// did; the only doctor check that writes.
CheckReport CheckStore(const std::string& path, bool repair = false);

// Asks the kcached at `address` for its statistics within `timeout_s`.
CheckReport CheckDaemon(const std::string& address, double timeout_s);

// The shared tier at `url` (docs/shared-tier.md): reachable, cluster_state ok (a cluster),
// and, with a key file, a probe entry signed with it written, read back and verified (then
// deleted). The only check that writes somewhere other than a store, and only the probe.
CheckReport CheckShared(const std::string& url, const std::string& key_file,
                        const std::string& second_key_file, double timeout_s);

// The CUDA libraries `paths`, and those the processes `pids` have mapped (/proc/PID/maps), for
// the GPUs `sms` (with `driver`, 0 unknown): per library and SM, how many of its modules
// (fatbins) have SASS that runs there, how many the driver would JIT-compile at every load
// (PTX only: fatbin::PlanLibrary), and of those, how many kcached at `server` ("": none asked)
// holds SASS for, which a worker under `kcache run` is served at load (docs/ptx-libraries.md).
// A module the driver would JIT that kcache does not hold is a problem, with the warm that
// fixes it; no SMs is a problem (pass --arch).
CheckReport CheckLibraries(const std::vector<std::string>& paths, const std::vector<int>& pids,
                           const std::vector<Sm>& sms, uint32_t driver, const std::string& server,
                           double timeout_s);

// kcache doctor [--toolkit DIR]... [--store DIR]... [--server ADDR]... [--require-gpu] [--json]
//               [--library PATH]... [--process PID]... [--arch LIST]
void RegisterDoctorCommand(CLI::App& app, int* exit_code);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_DOCTOR_H_
