// kcache warm --library: SASS built from the PTX of libraries that carry no SASS for a target,
// into a store (docs/ptx-libraries.md). Registered by warm_command.cc.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/cli/commands.h"
#include "client/cli/output.h"
#include "client/cli/python_packages.h"
#include "client/cli/warm_library.h"
#include "engine/compile/compiler.h"
#include "engine/fatbin/library.h"
#include "engine/fatbin/library_plan.h"
#include "engine/warm/library_warm.h"

namespace kcache::cli {
namespace {

using fatbin::Library;
using fatbin::TargetPlan;

// One line per entry compiled (or found stored).
class LinePrinter : public LibraryWarmObserver {
 public:
  void OnBuilt(const BuiltEntry& e) override {
    std::printf("  %-7s %-10s from %-12s %9s  %s\n", e.cached ? "cached" : "built",
                e.sass.ToString().c_str(), e.ptx.ToString().c_str(),
                e.cached ? "-" : HumanMicros(static_cast<int64_t>(e.micros)).c_str(),
                HumanBytes(e.bytes).c_str());
    std::fflush(stdout);
  }
};

void PrintEntries(const Library& library) {
  size_t n = library.entries().size();
  std::printf("%s: %s, %zu %s\n", library.path().c_str(),
              std::string(fatbin::LibraryFormatName(library.format())).c_str(), n,
              n == 1 ? "entry" : "entries");
  for (size_t i = 0; i < library.entries().size(); ++i) {
    std::printf("  entry %zu: %s\n", i, library.entries()[i].Describe().c_str());
  }
}

// What the library lacks per target, and what is (or, in a dry run, would be) built.
void PrintPlan(const Library& library, const std::vector<TargetPlan>& plans, bool dry_run) {
  bool several =
      std::any_of(plans.begin(), plans.end(), [](const TargetPlan& p) { return p.fatbin > 0; });
  for (const TargetPlan& p : plans) {
    // A library of several modules (fatbins): which one each line is of.
    std::string target = several ? absl::StrCat(p.target.sm.ToString(), " fatbin ", p.fatbin)
                                 : p.target.sm.ToString();
    switch (p.decision) {
      case TargetPlan::Decision::kHasSass:
        std::printf("  %-5s has SASS: entry %zu, %s\n", target.c_str(), *p.sass_entry,
                    library.entries()[*p.sass_entry].Describe().c_str());
        break;
      case TargetPlan::Decision::kBuild:
        std::printf("  %-5s lacks SASS: %s %s from entry %zu, %s\n", target.c_str(),
                    dry_run ? "would build" : "builds", p.build.ToString().c_str(), *p.ptx_entry,
                    library.entries()[*p.ptx_entry].Describe().c_str());
        break;
      case TargetPlan::Decision::kNoCode:
        std::printf("  %-5s lacks SASS: nothing to build from (%s)\n", target.c_str(),
                    p.note.c_str());
        break;
    }
  }
}

// --arch as the SASS targets to build; InvalidArgument naming the bad one.
absl::StatusOr<std::vector<Target>> SassTargets(const std::string& arch) {
  absl::StatusOr<std::vector<Target>> targets = ParseTargetList(arch);
  if (!targets.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--arch: ", targets.status().message()));
  }
  for (const Target& t : *targets) {
    if (t.kind != TargetKind::kSass) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--arch: ", t.ToString(), " is PTX; --library builds SASS for devices: give 8.9, 9.0a"));
    }
  }
  return targets;
}

// A library to read (`from_package`: one of a package's files, which carries CUDA code).
struct LibraryToRead {
  std::string path;
  bool from_package = false;
};

// --library's files, then each --package's that carry CUDA code (a file without is skipped, not
// listed), each package's count printed; a package or a file that cannot be read is said on
// stderr and raises *exit_code.
std::vector<LibraryToRead> LibrariesToRead(const LibraryWarmFlags& flags, int* exit_code) {
  std::vector<LibraryToRead> items;
  for (const std::string& path : flags.libraries) items.push_back({path, false});
  for (const std::string& package : flags.packages) {
    absl::StatusOr<PackageFileList> files = PackageFiles(flags.python, package);
    if (!files.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(files.status().message()).c_str());
      *exit_code = std::max(*exit_code, kExitBadInput);
      continue;
    }
    size_t with_code = 0, unreadable = 0;
    for (const std::string& file : files->files) {
      absl::StatusOr<Library> read = Library::Read(file);
      if (!read.ok()) {  // said once, here; not counted as carrying CUDA code
        std::fflush(stdout);
        std::fprintf(stderr, "error: package %s: %s\n", package.c_str(),
                     std::string(read.status().message()).c_str());
        *exit_code = std::max(*exit_code, kExitBadInput);
        ++unreadable;
        continue;
      }
      if (read->entries().empty()) continue;  // no CUDA code: nothing to do
      ++with_code;
      items.push_back({file, true});
    }
    std::printf("package %s: %zu of its %zu shared objects, cubins and fatbins carry CUDA code%s\n",
                package.c_str(), with_code, files->files.size(),
                unreadable == 0 ? "" : absl::StrCat(" (", unreadable, " unreadable)").c_str());
    if (!files->outside.empty()) {
      std::printf("package %s: %zu RECORD entries outside its install not read (%s%s)\n",
                  package.c_str(), files->outside.size(), files->outside[0].c_str(),
                  files->outside.size() > 1 ? ", ..." : "");
    }
  }
  return items;
}

}  // namespace

int RunWarmLibraries(const LibraryWarmFlags& flags) {
  absl::StatusOr<std::vector<Target>> targets = SassTargets(flags.arch);
  if (!targets.ok()) return Fail(targets.status().message(), kExitBadInput);
  std::shared_ptr<const Toolkit> toolkit;
  std::unique_ptr<Store> store;
  std::unique_ptr<Compiler> compiler;  // builds in this process, one at a time
  if (!flags.dry_run) {
    absl::StatusOr<std::shared_ptr<const Toolkit>> loaded = LoadToolkitForCli(flags.toolkit);
    if (!loaded.ok()) return Fail(loaded.status().message(), kExitBadInput);
    toolkit = *loaded;
    for (const Target& target : *targets) {
      absl::Status valid =
          ValidateTarget(target, toolkit->supported_archs(), toolkit->identity().DisplayName());
      if (!valid.ok()) return Fail(absl::StrCat("--arch: ", valid.message()), kExitBadInput);
    }
    absl::StatusOr<std::unique_ptr<Store>> opened =
        OpenStoreForCli(flags.store, StoreUse::kCreateOrWrite);
    if (!opened.ok()) return Fail(opened.status().message(), kExitBadInput);
    store = *std::move(opened);
    compiler = NewNvrtcCompiler(toolkit);
  }

  int exit_code = kExitOk;
  std::vector<LibraryToRead> items = LibrariesToRead(flags, &exit_code);
  int built = 0, cached = 0;
  LinePrinter printer;
  for (const LibraryToRead& item : items) {
    // Absolute, so that `kcache ls` names the library wherever the store is read.
    absl::StatusOr<Library> library =
        Library::Read(std::filesystem::absolute(item.path).lexically_normal().string());
    if (!library.ok()) {
      std::fflush(stdout);
      std::fprintf(stderr, "error: %s\n", std::string(library.status().message()).c_str());
      exit_code = std::max(exit_code, kExitBadInput);
      continue;
    }
    PrintEntries(*library);
    PrintPlan(*library, fatbin::PlanLibrary(*library, *targets), flags.dry_run);
    if (flags.dry_run) continue;
    absl::StatusOr<LibraryWarmResult> result =
        WarmLibrary(*library, *targets, *store, *compiler, &printer);
    if (!result.ok()) {
      std::fflush(stdout);
      std::fprintf(stderr, "error: %s\n", std::string(result.status().message()).c_str());
      bool bad_input = result.status().code() == absl::StatusCode::kDataLoss ||
                       result.status().code() == absl::StatusCode::kInvalidArgument;
      exit_code = std::max(exit_code, bad_input ? kExitBadInput : kExitFailed);
      continue;
    }
    for (const BuiltEntry& e : result->built) (e.cached ? cached : built)++;
  }
  if (!flags.dry_run) {
    std::printf("%s: %d built, %d already stored, into %s with %s\n",
                exit_code == kExitOk ? "done" : "FAILED", built, cached, flags.store.c_str(),
                toolkit->identity().DisplayName().c_str());
  }
  std::fflush(stdout);
  return exit_code;
}

}  // namespace kcache::cli
