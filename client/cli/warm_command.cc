// kcache warm: precompile a manifest for an architecture list straight into a store.
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/cli/node_devices.h"
#include "client/cli/output.h"
#include "client/cli/server_commands.h"
#include "client/cli/warm_library.h"
#include "core/manifest.h"
#include "engine/compile/compiler.h"
#include "engine/warm/warm.h"
#include "engine/workers/process_pool.h"

namespace kcache::cli {
namespace {

struct WarmFlags {
  std::string arch;
  std::string store;
  std::string server;
  std::string toolkit;
  std::string manifest;
  int jobs = 0;
  bool allow_unsandboxed = false;
  std::vector<std::string> libraries;  // --library: build SASS from their PTX instead
  std::vector<std::string> packages;   // --package: the libraries of installed Python packages
  std::string python = "python3";      // --python: whose packages
  bool dry_run = false;
};

// Prints a line per finished job and, on a terminal, a live line of what is compiling.
class PrintingObserver : public WarmObserver {
 public:
  PrintingObserver() : live_(stdout) {}

  void OnPlan(const std::vector<WarmJob>& jobs) override {
    total_ = static_cast<int>(jobs.size());
    start_ = std::chrono::steady_clock::now();
  }
  void OnJobStart(const WarmJob& job) override {
    running_[Label(job)] = true;
    Redraw();
  }
  void OnJobDone(const WarmJobResult& r, int done, int total) override {
    running_.erase(Label(r.job));
    live_.Clear();
    std::string width = std::to_string(total);
    std::string counter = absl::StrCat(
        "[", std::string(width.size() - std::to_string(done).size(), ' '), done, "/", total, "]");
    std::string name = r.job.kernel->record.spec.name;
    std::string target = r.job.target.ToString();
    std::string outcome(WarmOutcomeName(r.outcome));
    switch (r.outcome) {
      case WarmOutcome::kBuilt:
      case WarmOutcome::kCached:
        std::printf("%s %-7s %-28s %-9s %9s  %-16s %s\n", counter.c_str(), outcome.data(),
                    name.c_str(), target.c_str(), HumanMicros(r.micros).c_str(),
                    absl::StrJoin(r.kinds, "+").c_str(), HumanBytes(r.bytes).c_str());
        break;
      case WarmOutcome::kSkipped:
        std::printf("%s %-7s %-28s %-9s %s\n", counter.c_str(), outcome.data(), name.c_str(),
                    target.c_str(), r.message.c_str());
        break;
      case WarmOutcome::kFailed:  // on stderr: the NVRTC log is what a failed build shows
        std::fflush(stdout);
        std::fprintf(stderr, "%s FAILED  %-28s %-9s %9s\n%s\n", counter.c_str(), name.c_str(),
                     target.c_str(), HumanMicros(r.micros).c_str(), Indent(r.message).c_str());
        break;
    }
    std::fflush(stdout);
    Redraw();
  }
  void Finish() { live_.Clear(); }

 private:
  static std::string Label(const WarmJob& job) {
    return absl::StrCat(job.kernel->record.spec.name, " ", job.target.ToString());
  }
  static std::string Indent(const std::string& text) {
    std::string out = "    ";
    for (char c : text) {
      out += c;
      if (c == '\n') out += "    ";
    }
    return out;
  }
  void Redraw() {
    if (!live_.enabled() || running_.empty()) return;
    std::vector<std::string> names;
    for (const auto& [label, unused] : running_) names.push_back(label);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    live_.Show(absl::StrCat("  compiling ", absl::StrJoin(names, ", "), "  (",
                            absl::StrFormat("%.1f", secs), " s)"));
  }

  LiveLine live_;
  int total_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::map<std::string, bool> running_;
};

void PrintSummary(const WarmSummary& summary, const std::vector<Target>& targets) {
  struct Counts {
    int built = 0, cached = 0, skipped = 0, failed = 0;
  };
  std::map<std::string, Counts> by_target;
  for (const WarmJobResult& r : summary.results) {
    Counts& c = by_target[r.job.target.ToString()];
    switch (r.outcome) {
      case WarmOutcome::kBuilt:
        ++c.built;
        break;
      case WarmOutcome::kCached:
        ++c.cached;
        break;
      case WarmOutcome::kSkipped:
        ++c.skipped;
        break;
      case WarmOutcome::kFailed:
        ++c.failed;
        break;
    }
  }
  Table table({"target", "built", "already cached", "skipped (arch)", "failed"}, {1, 2, 3, 4});
  for (const Target& t : targets) {
    const Counts& c = by_target[t.ToString()];
    table.AddRow({t.ToString(), std::to_string(c.built), std::to_string(c.cached),
                  std::to_string(c.skipped), std::to_string(c.failed)});
  }
  table.AddRow({"total", std::to_string(summary.built), std::to_string(summary.cached),
                std::to_string(summary.skipped), std::to_string(summary.failed)});
  std::printf("\n%s", table.Render().c_str());
  std::printf("%s in %s\n", summary.ok() ? "done" : "FAILED",
              HumanMicros(summary.wall_micros).c_str());
  std::fflush(stdout);
  for (const WarmJobResult& r : summary.results) {
    if (r.outcome == WarmOutcome::kFailed) {
      std::fprintf(stderr, "failed: %s for %s (log above)\n",
                   r.job.kernel->record.spec.name.c_str(), r.job.target.ToString().c_str());
    }
  }
}

int RunWarm(const WarmFlags& flags) {
  absl::StatusOr<std::vector<Target>> targets = ParseTargetList(flags.arch);
  if (!targets.ok())
    return Fail(absl::StrCat("--arch: ", targets.status().message()), kExitBadInput);
  absl::StatusOr<Manifest> manifest = LoadManifest(flags.manifest);
  if (!manifest.ok()) return Fail(manifest.status().message(), kExitBadInput);
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = LoadToolkitForCli(flags.toolkit);
  if (!toolkit.ok()) return Fail(toolkit.status().message(), kExitBadInput);
  for (const Target& target : *targets) {
    absl::Status valid =
        ValidateTarget(target, (*toolkit)->supported_archs(), (*toolkit)->identity().DisplayName());
    if (!valid.ok()) return Fail(absl::StrCat("--arch: ", valid.message()), kExitBadInput);
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenStoreForCli(flags.store, StoreUse::kCreateOrWrite);
  if (!store.ok()) return Fail(store.status().message(), kExitBadInput);

  // The same sandboxed worker processes as kcached's: a manifest exported from a daemon
  // carries sources that its clients sent.
  int jobs = flags.jobs > 0 ? flags.jobs : static_cast<int>(std::thread::hardware_concurrency());
  ProcessPoolOptions pool_options;
  pool_options.workers = jobs;
  absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> compiler =
      NewProcessPoolCompiler(*toolkit, pool_options);
  if (!compiler.ok()) return Fail(compiler.status().message());
  if (!(*compiler)->sandboxed() && !flags.allow_unsandboxed) {
    return Fail(absl::StrCat(
        "the compile workers cannot be sandboxed here: ", (*compiler)->sandbox(),
        "; a kernel's #include could read this machine's files. Run on a kernel with Landlock "
        "and seccomp, or pass --allow-unsandboxed-compiles if you trust every source in ",
        flags.manifest));
  }
  std::printf("warming %zu kernels x %zu targets (%s) into %s with %s, %d jobs\n",
              manifest->kernels.size(), targets->size(), flags.arch.c_str(), flags.store.c_str(),
              (*toolkit)->identity().DisplayName().c_str(), jobs);
  std::printf("compile workers: %s\n", (*compiler)->sandbox().c_str());
  PrintingObserver observer;
  absl::StatusOr<WarmSummary> summary =
      Warm(*manifest, WarmOptions{*targets, jobs}, **store, **compiler, &observer);
  observer.Finish();
  if (!summary.ok()) return Fail(summary.status().message());
  PrintSummary(*summary, *targets);
  return summary->ok() ? kExitOk : kExitFailed;
}

// What `kcache warm` runs for its flags: a manifest's compiles into a store or through kcached,
// or libraries' SASS from their PTX; its exit code.
int RunWarmCommand(WarmFlags& flags) {
  absl::StatusOr<std::string> arch = flags.arch;
  if (NamesNative(flags.arch)) arch = ExpandNativeArch(flags.arch, client::DetectDevices());
  if (arch.ok()) flags.arch = *arch;
  bool libraries = !flags.libraries.empty() || !flags.packages.empty();
  if (libraries && arch.ok()) {
    if (!flags.server.empty()) {
      return Fail(
          "--library and --package work with --store; a running kcached does not build them",
          kExitBadInput);
    } else if (flags.store.empty() && !flags.dry_run) {
      return Fail("--library and --package need --store DIR (or --dry-run)", kExitBadInput);
    } else {
      LibraryWarmFlags library_flags;
      library_flags.libraries = flags.libraries;
      library_flags.packages = flags.packages;
      library_flags.python = flags.python;
      library_flags.arch = flags.arch;
      library_flags.store = flags.store;
      library_flags.toolkit = flags.toolkit;
      library_flags.dry_run = flags.dry_run;
      return RunWarmLibraries(library_flags);
    }
  }
  if (flags.dry_run) {
    return Fail("--dry-run works with --library or --package", kExitBadInput);
  }
  if (!libraries && flags.manifest.empty()) {
    return Fail("warm needs a manifest (or --library PATH..., --package NAME...)", kExitBadInput);
  }
  if (absl::Status s = CheckStoreOrServer(flags.store, flags.server); !s.ok()) {
    return Fail(s.message(), kExitBadInput);
  } else if (!arch.ok()) {
    return Fail(arch.status().message(), kExitBadInput);
  } else if (!flags.server.empty()) {
    return RunWarmOnServer({flags.server, flags.arch, flags.manifest, flags.jobs});
  } else {
    return RunWarm(flags);
  }
}

}  // namespace

void RegisterWarmCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<WarmFlags>();
  CLI::App* warm = app.add_subcommand(
      "warm",
      "Compile every kernel of a manifest for each target into a store (or have a running\n"
      "kcached compile them into its store); what the store already holds is not compiled\n"
      "again. Exit 0 only if everything was built.");
  CLI::Option* manifest =
      warm->add_option("manifest", flags->manifest, "Kernel manifest (docs/manifest.md)");
  CLI::Option* library = warm->add_option(
      "--library", flags->libraries,
      "Instead of a manifest: libraries (shared objects, executables, fatbins, cubins) whose "
      "PTX is compiled to SASS for each --arch they carry no SASS for (docs/ptx-libraries.md)");
  library->excludes(manifest);
  CLI::Option* package = warm->add_option(
      "--package", flags->packages,
      "Like --library, for every shared object, cubin and fatbin an installed Python package "
      "ships (pip's name, e.g. nvidia-cublas-cu12; repeatable)");
  package->excludes(manifest);
  warm->add_option("--python", flags->python,
                   "With --package: the Python interpreter whose environment holds the packages "
                   "(e.g. /opt/venv/bin/python)")
      ->needs(package)
      ->capture_default_str();
  warm->add_flag("--dry-run", flags->dry_run,
                 "With --library or --package: say per library and target what is missing and "
                 "what would be built from which PTX; compile and store nothing");
  warm->add_option(
          "--arch", flags->arch,
          "Targets, comma-separated: 7.5,8.6,8.9 (SASS + PTX), 9.0a, compute_90; native: the SMs "
          "of this machine's GPUs")
      ->required();
  CLI::Option* store =
      warm->add_option("--store", flags->store, "Store directory (created if missing)");
  CLI::Option* server = warm->add_option(
      "--server", flags->server,
      "Have a running kcached compile instead, e.g. unix:///run/kcache/kcache.sock");
  store->excludes(server);
  warm->add_option("--jobs,-j", flags->jobs, "Parallel compiles (default: one per core)")
      ->check(CLI::PositiveNumber);
  CLI::Option* toolkit = warm->add_option(
      "--toolkit", flags->toolkit, "CUDA toolkit root (default: $CUDA_HOME, else /usr/local/cuda)");
  toolkit->excludes(server);
  CLI::Option* unsandboxed = warm->add_flag(
      "--allow-unsandboxed-compiles", flags->allow_unsandboxed,
      "With --store: compile even where the compile workers cannot be sandboxed (no Landlock "
      "or seccomp here); only for manifests whose every source you trust");
  unsandboxed->excludes(server);
  warm->callback([flags, exit_code] { *exit_code = RunWarmCommand(*flags); });
}

}  // namespace kcache::cli
