// kcache doctor's libraries check (doctor.h, CheckLibraries): which modules of the libraries a
// worker loads the driver would JIT on this node's GPUs, and whether kcache holds their SASS
// (docs/ptx-libraries.md, "Serving at load").
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/doctor.h"
#include "client/cli/server_connect.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/library.h"
#include "engine/fatbin/library_plan.h"
#include "engine/fatbin/ptx_sass.h"
#include "kcache/kcache.h"

namespace kcache::cli {
namespace {

using nlohmann::json;

// The files process `pid` has mapped that may be shared objects (a path with ".so"), in the
// order first mapped; an error when its maps cannot be read.
absl::StatusOr<std::vector<std::string>> MappedLibraries(int pid) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  if (!maps) {
    return absl::NotFoundError(
        absl::StrCat("cannot read /proc/", pid, "/maps (no such process, or not ours to read)"));
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::string line;
  while (std::getline(maps, line)) {
    // address perms offset dev inode path
    std::istringstream fields(line);
    std::string address, perms, offset, dev, inode, path;
    fields >> address >> perms >> offset >> dev >> inode;
    std::getline(fields >> std::ws, path);
    if (path.empty() || path[0] != '/' || path.find(".so") == std::string::npos) continue;
    if (seen.insert(path).second) out.push_back(path);
  }
  return out;
}

// Whether kcached at `client` holds SASS for `module` that a GPU of `sm` with `driver` runs.
bool Held(client::Client* kcached, const KernelId& module, Sm sm, uint32_t driver) {
  if (kcached == nullptr) return false;
  client::CallOptions options;
  options.allow_daemon_compile = false;
  absl::StatusOr<client::FetchedKernel> got =
      kcached->ResolveById(module.Hex(), client::Device{sm.major, sm.minor, driver}, options);
  return got.ok() && got->kind == client::ArtifactKind::kCubin && !got->needs_jit;
}

}  // namespace

CheckReport CheckLibraries(const std::vector<std::string>& paths, const std::vector<int>& pids,
                           const std::vector<Sm>& sms, uint32_t driver, const std::string& server,
                           double timeout_s) {
  CheckReport report("libraries", "");
  report.details["libraries"] = json::array();
  std::vector<std::string> libraries = paths;
  for (int pid : pids) {
    absl::StatusOr<std::vector<std::string>> mapped = MappedLibraries(pid);
    if (!mapped.ok()) {
      report.Problem(std::string(mapped.status().message()), "pass the pid of a running worker");
      continue;
    }
    libraries.insert(libraries.end(), mapped->begin(), mapped->end());
  }
  if (sms.empty()) {
    report.Problem("no GPU to check the libraries for",
                   "run doctor where the GPUs are, or pass --arch 8.9,9.0");
    return report;
  }
  std::unique_ptr<client::Client> kcached;
  if (!server.empty()) {
    absl::StatusOr<std::unique_ptr<client::Client>> connected = ConnectForCli(server, timeout_s);
    if (connected.ok()) {
      kcached = *std::move(connected);
    } else {
      report.Problem(
          absl::StrCat("cannot ask kcached whether it holds SASS: ", connected.status().message()),
          "pass --server unix:///PATH of the node's kcached");
    }
  }
  std::set<std::string> done;
  size_t without_code = 0;
  for (const std::string& path : libraries) {
    if (!done.insert(path).second) continue;
    absl::StatusOr<fatbin::Library> library = fatbin::Library::Read(path);
    if (!library.ok()) {
      report.Info(absl::StrCat(path, ": not read (", library.status().message(), ")"));
      continue;
    }
    if (library->entries().empty()) {
      ++without_code;  // a host library with no CUDA code: nothing to say
      continue;
    }
    std::vector<Target> targets;
    for (Sm sm : sms) targets.push_back(Target{TargetKind::kSass, sm});
    std::vector<fatbin::TargetPlan> plans = fatbin::PlanLibrary(*library, targets);
    for (Sm sm : sms) {
      size_t modules = 0, jit = 0, held = 0, no_code = 0;
      for (const fatbin::TargetPlan& plan : plans) {
        if (plan.target.sm != sm) continue;
        ++modules;
        if (plan.decision == fatbin::TargetPlan::Decision::kNoCode) ++no_code;
        if (plan.decision != fatbin::TargetPlan::Decision::kBuild) continue;
        ++jit;
        const fatbin::FatbinEntry& entry = library->entries()[*plan.ptx_entry];
        absl::StatusOr<std::string> ptx = fatbin::EntryPayload(entry, path);
        if (ptx.ok() &&
            Held(kcached.get(),
                 fatbin::PtxModuleId(*ptx, entry.jit_options, fatbin::PtxSassCompileOptions()), sm,
                 driver)) {
          ++held;
        }
      }
      report.details["libraries"].push_back({{"path", path},
                                             {"sm", sm.ToString()},
                                             {"modules", modules},
                                             {"driver_jits", jit},
                                             {"kcache_holds", held},
                                             {"no_code", no_code}});
      std::string what = absl::StrCat(path, " on ", sm.ToString(), ": ", modules,
                                      modules == 1 ? " module" : " modules");
      if (no_code > 0) {
        report.Info(absl::StrCat(what, ", ", no_code,
                                 " with neither SASS nor PTX for it (the driver cannot load "
                                 "them there)"));
      }
      if (jit == 0) {
        if (no_code == 0) report.Ok(absl::StrCat(what, ", each with SASS that runs there"));
      } else if (held == jit) {
        report.Ok(absl::StrCat(what, ", ", jit,
                               " without SASS, all held by kcache: served at "
                               "load under `kcache run`"));
      } else {
        report.Problem(
            absl::StrCat(what, ", ", jit,
                         " without SASS that the driver JIT-compiles at every "
                         "load in a new pod; kcache holds ",
                         held, kcached == nullptr ? " (no --server asked)" : ""),
            absl::StrCat("in the image: kcache warm --library ", path, " --arch ", sm.ToString(),
                         " --store DIR (kcached's store); in the pod, start "
                         "the worker under `kcache run --server ...`"));
      }
    }
  }
  if (libraries.empty()) report.Info("no libraries given");
  if (without_code > 0) {
    report.Info(absl::StrCat(without_code, without_code == 1 ? " library has" : " libraries have",
                             " no CUDA code"));
  }
  return report;
}

}  // namespace kcache::cli
