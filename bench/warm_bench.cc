// bench/warm: `kcache warm` of a manifest for an architecture list against `nvcc -fatbin`
// with the same -gencode list for the same sources, both measured in this run, on this
// machine, with the same number of compiles in flight. Prints the ratio and, with
// --write-doc, rewrites its section of docs/BENCHMARKS.md.
//
//   build/bench/kcache_bench_warm [--manifest kernels/manifest.yaml] [--arch 7.5,8.6,8.9]
//                                 [--jobs N] [--write-doc docs/BENCHMARKS.md]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/bench_doc.h"
#include "core/manifest.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/store/store.h"
#include "engine/warm/warm.h"
#include "tests/testutil/tree_paths.h"

namespace kcache::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A .cu that nvcc can build into the same code NVRTC builds: the kernel's source, plus a
// host-side reference to each name expression so nvcc instantiates the same templates.
std::string NvccWrapper(const ManifestKernel& kernel, const fs::path& source) {
  std::string out = absl::StrCat("#include \"", source.filename().string(), "\"\n");
  if (!kernel.record.spec.name_expressions.empty()) {
    absl::StrAppend(&out, "static void* const kcache_instances[] __attribute__((used)) = {\n");
    for (const std::string& e : kernel.record.spec.name_expressions) {
      absl::StrAppend(&out, "  reinterpret_cast<void*>(&", e, "),\n");
    }
    absl::StrAppend(&out, "};\n");
  }
  return out;
}

// Writes each kernel's wrapper into its own folder and returns the nvcc command lines.
std::vector<std::string> NvccCommands(const Manifest& manifest, const std::vector<Target>& targets,
                                      const Toolkit& toolkit, const fs::path& work,
                                      int nvcc_threads) {
  std::vector<std::string> commands;
  fs::path manifest_dir = fs::path(manifest.path).parent_path();
  for (const ManifestKernel& kernel : manifest.kernels) {
    std::vector<std::string> gencode;
    for (const Target& t : targets) {
      if (!kernel.record.arch.Contains(t.sm.arch())) continue;  // kcache skips these too
      std::string arch = t.ToString().substr(t.ToString().find('_') + 1);
      gencode.push_back(
          absl::StrCat("-gencode arch=compute_", arch, ",code=[sm_", arch, ",compute_", arch, "]"));
    }
    if (gencode.empty()) continue;
    fs::path dir = work / kernel.record.spec.name;
    fs::create_directories(dir);
    fs::path source = fs::path(kernel.source_path);
    std::ofstream(dir / source.filename()) << kernel.record.spec.source;
    for (const auto& [name, content] : kernel.record.spec.headers) {
      fs::create_directories((dir / name).parent_path());
      std::ofstream(dir / name) << content;
    }
    std::ofstream(dir / "wrapper.cu") << NvccWrapper(kernel, source);
    std::vector<std::string> options;
    for (const std::string& o : kernel.record.spec.options) options.push_back("'" + o + "'");
    commands.push_back(absl::StrCat(
        "cd '", dir.string(), "' && '", toolkit.root(), "/bin/nvcc' -fatbin -t ", nvcc_threads, " ",
        absl::StrJoin(options, " "), " ", absl::StrJoin(gencode, " "),
        " -o out.fatbin wrapper.cu > nvcc.log 2>&1 || { cat nvcc.log >&2; exit 1; }"));
  }
  return commands;
}

// Runs the commands `jobs` at a time. False if any failed.
bool RunAll(const std::vector<std::string>& commands, int jobs) {
  std::atomic<size_t> next{0};
  std::atomic<bool> ok{true};
  std::vector<std::thread> pool;
  for (int t = 0; t < jobs; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < commands.size(); i = next++) {
        if (std::system(commands[i].c_str()) != 0) ok = false;
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return ok;
}

int Main(int argc, char** argv) {
  std::string manifest_path = testing::SourcePath("kernels/manifest.yaml");
  std::string arch = "7.5,8.6,8.9";
  std::string doc;
  int jobs = static_cast<int>(std::thread::hardware_concurrency());
  CLI::App app{"kcache warm vs nvcc -fatbin for the same sources and -gencode list"};
  app.add_option("--manifest", manifest_path, "Manifest to build");
  app.add_option("--arch", arch, "Targets");
  app.add_option("--jobs", jobs, "Compiles in flight, for both sides");
  app.add_option("--write-doc", doc, "Rewrite this benchmark's section of this Markdown file");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<Manifest> manifest = LoadManifest(manifest_path);
  absl::StatusOr<std::vector<Target>> targets = ParseTargetList(arch);
  if (!manifest.ok() || !targets.ok()) {
    std::fprintf(
        stderr, "%s\n",
        std::string((manifest.ok() ? targets.status() : manifest.status()).message()).c_str());
    return 2;
  }
  fs::path work = fs::temp_directory_path() / absl::StrCat("kcache-bench-warm-", getpid());
  fs::create_directories(work);

  // kcache: load the toolkit (cold process, as in a Docker RUN step) and warm a new store.
  Clock::time_point start = Clock::now();
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(Toolkit::DefaultRoot());
  if (!toolkit.ok()) {
    std::fprintf(stderr, "%s\n", std::string(toolkit.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<Compiler> compiler = NewNvrtcCompiler(*toolkit);
  absl::StatusOr<std::unique_ptr<Store>> store = OpenStore((work / "store").string());
  absl::StatusOr<WarmSummary> cold =
      Warm(*manifest, WarmOptions{*targets, jobs}, **store, *compiler, nullptr);
  double kcache_s = SecondsSince(start);
  start = Clock::now();
  absl::StatusOr<WarmSummary> warm =
      Warm(*manifest, WarmOptions{*targets, jobs}, **store, *compiler, nullptr);
  double rewarm_s = SecondsSince(start);
  if (!cold.ok() || !cold->ok() || !warm.ok()) {
    std::fprintf(stderr, "kcache warm failed\n");
    return 1;
  }

  // Two ways to give nvcc the same cores: `jobs` single-threaded processes at a time, or one
  // process at a time compiling its -gencode list with `jobs` threads (nvcc -t). The ratio is
  // taken against the faster.
  std::vector<std::string> commands =
      NvccCommands(*manifest, *targets, **toolkit, work / "nvcc", 1);
  start = Clock::now();
  bool nvcc_ok = RunAll(commands, jobs);
  double nvcc_procs_s = SecondsSince(start);
  std::vector<std::string> threaded =
      NvccCommands(*manifest, *targets, **toolkit, work / "nvcc-t", jobs);
  start = Clock::now();
  nvcc_ok = nvcc_ok && RunAll(threaded, 1);
  double nvcc_threads_s = SecondsSince(start);
  fs::remove_all(work);
  if (!nvcc_ok) {
    std::fprintf(stderr, "nvcc failed (log above)\n");
    return 1;
  }
  double nvcc_s = std::min(nvcc_procs_s, nvcc_threads_s);

  double ratio = kcache_s / nvcc_s;
  std::string table = absl::StrFormat(
      "| what | wall time |\n|---|---|\n"
      "| `nvcc -fatbin -t 1`, %zu processes, %d at a time | %.2f s |\n"
      "| `nvcc -fatbin -t %d`, %zu processes, one at a time | %.2f s |\n"
      "| `kcache warm`, cold store (%d compiles, %d skipped by min_arch) | %.2f s |\n"
      "| `kcache warm` again (all %d cached) | %.3f s |\n"
      "| **kcache / faster nvcc** | **%.2f** (goal: at most 0.50) |\n",
      commands.size(), jobs, nvcc_procs_s, jobs, threaded.size(), nvcc_threads_s, cold->built,
      cold->skipped, kcache_s, warm->cached, rewarm_s, ratio);
  std::printf("bench/warm: %zu kernels x {%s}, %d jobs, %s\n%s", manifest->kernels.size(),
              arch.c_str(), jobs, (*toolkit)->identity().DisplayName().c_str(), table.c_str());
  if (!doc.empty()) {
    std::string body = absl::StrCat(
        "Bundled manifest for `", arch, "` on ", std::thread::hardware_concurrency(),
        " cores with ", (*toolkit)->identity().DisplayName(), "; both sides in one run.\n\n", table,
        "\nRerun: `build/bench/kcache_bench_warm --write-doc docs/BENCHMARKS.md`\n");
    if (absl::Status s = ReplaceSection(doc, "warm", body); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace kcache::bench

int main(int argc, char** argv) { return kcache::bench::Main(argc, argv); }
