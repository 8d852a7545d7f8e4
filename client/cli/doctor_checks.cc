// The checks of kcache doctor: each reads one thing and reports what it found.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/cli/doctor.h"
#include "client/cli/output.h"
#include "client/cli/server_connect.h"
#include "core/environment.h"
#include "core/target.h"
#include "engine/workers/sandbox.h"
#include "kcache/device.h"

namespace kcache::cli {
namespace {

using nlohmann::json;

// Library messages say what is wrong, then "; " and their advice: splits the advice off (at
// the first "; ", or the last when the cause itself may hold one), so a finding shows what is
// wrong and its fix on separate lines.
std::pair<std::string, std::string> SplitAdvice(absl::string_view message, bool last = false) {
  size_t at = last ? message.rfind("; ") : message.find("; ");
  if (at == absl::string_view::npos) return {std::string(message), ""};
  return {std::string(message.substr(0, at)), std::string(message.substr(at + 2))};
}

std::string ArchList(const std::vector<int>& archs) {
  std::vector<std::string> names;
  for (int arch : archs) names.push_back(SmFromArch(arch).ToString());
  return absl::StrJoin(names, " ");
}

std::string Count(uint64_t n, absl::string_view singular, absl::string_view plural) {
  return absl::StrCat(n, " ", n == 1 ? singular : plural);
}

std::string DriverText(uint32_t version) {  // 13000 -> "13.0"
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

// How the toolkits serve a GPU of `arch`: "" when none can (then *fix says what to do).
std::string ToolkitCoverage(int arch, const std::vector<std::shared_ptr<const Toolkit>>& toolkits,
                            std::string* fix) {
  int lowest = 0;
  for (const auto& toolkit : toolkits) {
    const std::vector<int>& archs = toolkit->supported_archs();
    if (std::find(archs.begin(), archs.end(), arch) != archs.end()) {
      return absl::StrCat("cubins from ", toolkit->identity().DisplayName());
    }
    int below = 0;
    for (int a : archs) {
      if (a < arch) below = std::max(below, a);
    }
    if (below > 0) {
      return absl::StrCat("PTX for ", SmFromArch(below).ToString(), " from ",
                          toolkit->identity().DisplayName(), ", JIT-compiled by the driver");
    }
    if (!archs.empty()) lowest = lowest == 0 ? archs.front() : std::min(lowest, archs.front());
  }
  *fix = absl::StrCat("load a toolkit that still supports ", SmFromArch(arch).ToString(),
                      " (the lowest loaded supports ", SmFromArch(lowest).ToString(),
                      "), e.g. CUDA 12, with --toolkit DIR; or serve this GPU from a store "
                      "warmed elsewhere");
  return "";
}

}  // namespace

absl::string_view LevelName(Level level) {
  switch (level) {
    case Level::kOk:
      return "ok";
    case Level::kInfo:
      return "info";
    case Level::kProblem:
      return "problem";
  }
  return "?";
}

int CheckReport::problems() const {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(), [](const Finding& f) {
    return f.level == Level::kProblem;
  }));
}

CheckReport CheckToolkit(const std::string& root, bool from_default,
                         std::shared_ptr<const Toolkit>* loaded) {
  CheckReport report("toolkit", root);
  report.details["root"] = root;
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(root);
  if (!toolkit.ok()) {
    std::optional<std::string> cuda_home = EnvIfSet("CUDA_HOME");
    std::string where =
        from_default ? (cuda_home.has_value() ? absl::StrCat(" (from CUDA_HOME=", *cuda_home, ")")
                                              : " (the default; CUDA_HOME is unset)")
                     : "";
    report.details["error"] = std::string(toolkit.status().message());
    report.Problem(SplitAdvice(toolkit.status().message()).first,
                   absl::StrCat("install the CUDA 13 toolkit at ", root, where,
                                ", or pass --toolkit DIR (or set CUDA_HOME) naming one"));
    return report;
  }
  const Toolkit& t = **toolkit;
  const ToolkitIdentity& identity = t.identity();
  report.Ok(absl::StrCat(identity.DisplayName(), ", id ", identity.id, ", loaded in ",
                         HumanMicros(t.load_micros())));
  if (t.supported_archs().empty()) {
    report.Problem("NVRTC reports no supported architecture",
                   absl::StrCat("reinstall the toolkit at ", root));
  } else {
    report.Ok(absl::StrCat("architectures: ", ArchList(t.supported_archs())));
  }
  if (t.nvjitlink() != nullptr) {
    report.Ok("nvJitLink: found (LTO-IR can be linked)");
  } else {
    report.Info("nvJitLink: not found (kernels with want_ltoir cannot be linked)");
  }
  report.details.update({{"version", absl::StrCat(identity.major, ".", identity.minor)},
                         {"id", identity.id},
                         {"archs", t.supported_archs()},
                         {"nvjitlink", t.nvjitlink() != nullptr}});
  *loaded = *std::move(toolkit);
  return report;
}

std::vector<std::string> OtherToolkitRoots(const std::string& parent, const std::string& checked) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path skip = fs::weakly_canonical(checked, error);
  std::set<std::string> found;
  for (fs::directory_iterator it(parent, error), end; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    if (name != "cuda" && name.rfind("cuda-", 0) != 0) continue;
    std::error_code entry_error;  // one unreadable folder does not end the listing
    if (!fs::exists(it->path() / "include" / "nvrtc.h", entry_error)) continue;
    fs::path root = fs::weakly_canonical(it->path(), entry_error);
    if (!entry_error && root != skip) found.insert(root.string());
  }
  return {found.begin(), found.end()};
}

CheckReport CheckGpus(bool require_gpu,
                      const std::vector<std::shared_ptr<const Toolkit>>& toolkits) {
  CheckReport report("gpus", "");
  constexpr char kDriverFix[] =
      "install the NVIDIA driver (libcuda.so.1 on the loader path, or KCACHE_LIBCUDA=PATH), "
      "or run doctor where the GPUs are";
  absl::StatusOr<uint32_t> driver = client::DriverVersion();
  absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
  report.details["driver_version"] = driver.ok() ? json(*driver) : json(nullptr);
  report.details["gpus"] = json::array();
  if (driver.ok()) {
    report.Ok(absl::StrCat("driver: CUDA ", DriverText(*driver), " (", *driver, ")"));
  }
  if (!gpus.ok()) {
    std::string why = SplitAdvice(gpus.status().message()).first;
    report.details["error"] = std::string(gpus.status().message());
    if (!absl::IsNotFound(gpus.status())) {  // a driver that is there but fails
      report.Problem(absl::StrCat("the CUDA driver fails: ", why),
                     "check `nvidia-smi`; reload the driver or reboot the node");
    } else if (require_gpu) {
      report.Problem(absl::StrCat("GPUs: none (", why, ")"), kDriverFix);
    } else {
      report.Info(absl::StrCat(driver.ok() ? "" : "driver: none; ", "GPUs: none (", why,
                               "); fine for a build machine, pass --require-gpu where GPUs are "
                               "expected"));
    }
    return report;
  }
  for (const client::GpuInfo& gpu : *gpus) {
    int arch = gpu.device.arch();
    std::string text =
        absl::StrCat("GPU ", gpu.ordinal, ": ", gpu.name, ", sm ", gpu.device.ToString());
    report.details["gpus"].push_back(
        {{"ordinal", gpu.ordinal}, {"name", gpu.name}, {"sm", gpu.device.ToString()}});
    if (toolkits.empty()) {
      report.Ok(text);
      continue;
    }
    std::string fix;
    std::string coverage = ToolkitCoverage(arch, toolkits, &fix);
    if (coverage.empty()) {
      report.Problem(absl::StrCat(text, ": no loaded toolkit compiles for it"), fix);
    } else {
      report.Ok(absl::StrCat(text, ": ", coverage));
    }
  }
  return report;
}

CheckReport CheckSandbox() {
  CheckReport report("sandbox", "");
  SandboxSupport support = DetectSandboxSupport();
  report.details["landlock_abi"] = support.landlock_abi;
  report.details["seccomp"] = support.seccomp;
  report.details["user_namespaces"] = support.user_namespaces;
  report.details["enough"] = support.Enough();
  if (!support.Enough()) {
    report.Problem(
        absl::StrCat("compile workers cannot be sandboxed here: ", support.Describe(),
                     "; kcached refuses sources that clients send (it compiles only the baked "
                     "stores' kernels) and `kcache warm --store` will not run"),
        "run on Linux 5.13+ with Landlock enabled (lsm=...,landlock) and seccomp filters; in a "
        "container, allow the landlock_* syscalls in its seccomp profile; or accept the risk "
        "with --allow-unsandboxed-compiles");
    return report;
  }
  report.Ok(absl::StrCat("compile workers are sandboxed: ", support.Describe(),
                         " (docs/compile-workers.md)"));
  if (!support.user_namespaces) {
    report.Info(
        "no unprivileged user namespaces: workers get no network namespace of their own "
        "(seccomp still refuses every socket)");
  }
  return report;
}

namespace {

// Repairs the store at `path` (RepairStore) and reports what was done.
bool RepairForDoctor(const std::string& path, CheckReport& report) {
  absl::StatusOr<StoreRepairReport> repaired = RepairStore(path);
  if (!repaired.ok()) {
    report.details["repair_error"] = std::string(repaired.status().message());
    report.Problem(absl::StrCat("cannot repair: ", repaired.status().message()),
                   absl::IsFailedPrecondition(repaired.status())
                       ? "stop the kcached that holds it, then repair again (or restart kcached: "
                         "it moves a store that cannot open aside by itself)"
                       : "move the directory away and let kcached or `kcache warm` make a new one");
    return false;
  }
  report.details["repair"] = {{"replaced", repaired->replaced},
                              {"rebuilt", repaired->rebuilt},
                              {"moved_aside_to", repaired->moved_aside_to},
                              {"salvaged", repaired->salvaged},
                              {"dropped", repaired->dropped},
                              {"listings_rebuilt", repaired->listings_rebuilt},
                              {"problems", repaired->problems}};
  if (repaired->problems.empty()) {
    report.Ok("repair: nothing to repair");
    return true;
  }
  std::string what =
      repaired->replaced || repaired->rebuilt
          ? absl::StrCat("moved the damaged files aside",
                         repaired->moved_aside_to.empty()
                             ? ""
                             : absl::StrCat(" to ", repaired->moved_aside_to),
                         " and kept the ", repaired->salvaged, " entries that verified")
          : absl::StrCat("dropped ", repaired->dropped, " corrupt entries, rebuilt ",
                         repaired->listings_rebuilt, " listing entries");
  constexpr size_t kShown = 5;
  std::vector<std::string> shown(
      repaired->problems.begin(),
      repaired->problems.begin() + std::min(kShown, repaired->problems.size()));
  report.Ok(absl::StrCat("repaired: ", what, ":\n", absl::StrJoin(shown, "\n")));
  report.Info("what was lost is a miss: kcached compiles it again, or run `kcache warm` again");
  return true;
}

}  // namespace

CheckReport CheckStore(const std::string& path, bool repair) {
  CheckReport report("store", path);
  report.details["path"] = path;
  if (repair && !RepairForDoctor(path, report)) return report;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStoreForCli(path, StoreUse::kRead);
  if (!store.ok()) {
    auto [what, advice] = SplitAdvice(store.status().message());
    report.details["error"] = std::string(store.status().message());
    if (absl::IsDataLoss(store.status())) {
      report.Problem(what, absl::StrCat("repair it: `kcache doctor --store ", path,
                                        " --repair` with kcached stopped (or restart kcached, "
                                        "which moves its damaged store aside by itself)"));
      return report;
    }
    report.Problem(what, absl::StrCat(advice.empty() ? "" : absl::StrCat(advice, ", or "),
                                      "check --store (the daemon's --store or --baked directory)"));
    return report;
  }
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  absl::StatusOr<StoreVerifyReport> verified =
      stats.ok() ? (*store)->Verify() : absl::StatusOr<StoreVerifyReport>(stats.status());
  if (!verified.ok()) {
    report.details["error"] = std::string(verified.status().message());
    report.Problem(absl::StrCat("cannot read the store: ", verified.status().message()),
                   absl::StrCat("rebuild it: move ", path, " away and run `kcache warm --store ",
                                path, " ...` again"));
    return report;
  }
  report.Ok(absl::StrCat("opened read-only (format ", stats->format_version, "), ",
                         HumanBytes(stats->disk_bytes), " on disk"));
  report.Ok(absl::StrCat("checksums verified: ", Count(verified->kernels, "kernel", "kernels"),
                         ", ", Count(verified->artifacts, "artifact", "artifacts"), " (",
                         HumanBytes(verified->artifact_bytes), "), ",
                         Count(verified->listings, "listing entry", "listing entries")));
  if (verified->artifacts == 0 && verified->corrupt.empty()) {
    report.Info(absl::StrCat("the store is empty: fill it with `kcache warm --store ", path,
                             " MANIFEST --arch ...`"));
  }
  report.details.update({{"kernels", verified->kernels},
                         {"artifacts", verified->artifacts},
                         {"artifact_bytes", verified->artifact_bytes},
                         {"listings", verified->listings},
                         {"disk_bytes", stats->disk_bytes},
                         {"corrupt", verified->corrupt}});
  if (!verified->corrupt.empty()) {
    constexpr size_t kShown = 5;
    std::vector<std::string> shown(
        verified->corrupt.begin(),
        verified->corrupt.begin() + std::min(kShown, verified->corrupt.size()));
    std::string more = verified->corrupt.size() > kShown
                           ? absl::StrCat("\n", verified->corrupt.size() - kShown, " more")
                           : "";
    report.Problem(absl::StrCat(Count(verified->corrupt.size(), "corrupt entry", "corrupt entries"),
                                ":\n", absl::StrJoin(shown, "\n"), more),
                   absl::StrCat("with kcached running on it, `kcache warm --server ADDR MANIFEST "
                                "--arch ...` drops corrupt entries, rebuilds them and the listing "
                                "in place; otherwise run `kcache doctor --store ",
                                path,
                                " --repair` (it drops corrupt entries and rebuilds listings), then "
                                "`kcache warm --store ",
                                path,
                                " MANIFEST --arch ...` again to rebuild what was dropped; a baked "
                                "store: rebuild its image"));
  }
  return report;
}

CheckReport CheckDaemon(const std::string& address, double timeout_s) {
  CheckReport report("daemon", address);
  report.details["address"] = address;
  constexpr char kStartFix[] =
      "start kcached (`systemctl start kcached`, or `kcached --store DIR --listen ADDR`), or "
      "check --server";
  absl::StatusOr<std::unique_ptr<client::Client>> connected = ConnectForCli(address, timeout_s);
  if (!connected.ok()) {
    report.details["error"] = std::string(connected.status().message());
    report.Problem(std::string(connected.status().message()),
                   "pass --server unix:///PATH or HOST:PORT");
    return report;
  }
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<client::DaemonStats> stats = (*connected)->Stat();
  int64_t micros = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  if (!stats.ok()) {
    report.details["error"] = std::string(stats.status().message());
    report.Problem(
        absl::StrCat("no answer: ", SplitAdvice(stats.status().message(), /*last=*/true).first),
        kStartFix);
    return report;
  }
  report.Ok(absl::StrCat("kcached answers in ", HumanMicros(micros), ", up ", stats->uptime_seconds,
                         " s; ", stats->store_artifacts, " artifacts in its writable store (",
                         HumanBytes(stats->store_bytes), ")"));
  if (stats->toolkits.empty()) {
    report.Info("the daemon has no toolkit: it serves its stores but compiles no miss");
  } else {
    report.Ok(absl::StrCat("daemon toolkits: ", absl::StrJoin(stats->toolkits, ", ")));
  }
  report.details.update({{"answer_micros", micros},
                         {"uptime_seconds", stats->uptime_seconds},
                         {"store_artifacts", stats->store_artifacts},
                         {"store_bytes", stats->store_bytes},
                         {"toolkits", stats->toolkits}});
  return report;
}

}  // namespace kcache::cli
