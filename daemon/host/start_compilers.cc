// StartCompilers (start_compilers.h): the toolkits loaded and a compile worker pool for each.
#include "daemon/host/start_compilers.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/compile/toolkit.h"

namespace kcache {

namespace {

// The toolkits to load and whether their absence is an error.
struct ToolkitPlan {
  std::vector<std::string> roots;
  bool explicit_roots = false;
};

}  // namespace

absl::Status StartCompilers(const DaemonOptions& options,
                            std::vector<std::shared_ptr<ProcessPoolCompiler>>* pools,
                            ServiceOptions* service, std::string* summary) {
  if (options.no_toolkit) {
    *summary = "no toolkit (--no-toolkit): serve-only, misses answer \"compiling not allowed\"";
    return absl::OkStatus();
  }
  ToolkitPlan plan{options.toolkits, !options.toolkits.empty()};
  if (plan.roots.empty()) plan.roots.push_back(Toolkit::DefaultRoot());
  std::vector<std::shared_ptr<const Toolkit>> loaded;
  for (const std::string& root : plan.roots) {
    absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(root);
    if (!toolkit.ok()) {
      if (plan.explicit_roots) return toolkit.status();
      spdlog::warn("no toolkit: {}", std::string(toolkit.status().message()));
      *summary = absl::StrCat("no toolkit at ", root,
                              ": serve-only, misses answer \"no toolkit\" (pass --toolkit DIR "
                              "or set CUDA_HOME to compile)");
      return absl::OkStatus();
    }
    spdlog::info("toolkit {} loaded: {} in {} ms", (*toolkit)->identity().id,
                 (*toolkit)->identity().DisplayName(), (*toolkit)->load_micros() / 1000);
    loaded.push_back(*std::move(toolkit));
  }
  // Warm validates its targets against the newest toolkit, which it compiles with.
  const Toolkit* newest = nullptr;
  std::vector<std::string> names;
  for (const std::shared_ptr<const Toolkit>& toolkit : loaded) {
    absl::StatusOr<std::unique_ptr<ProcessPoolCompiler>> pool =
        NewProcessPoolCompiler(toolkit, options.compile);
    if (!pool.ok()) {
      return absl::Status(
          pool.status().code(),
          absl::StrCat(pool.status().message(), " (or start with --no-toolkit to serve only)"));
    }
    pools->push_back(*std::move(pool));
    const ToolkitIdentity& v = toolkit->identity();
    if (newest == nullptr || v.NewerThan(newest->identity())) newest = toolkit.get();
    names.push_back(v.DisplayName());
  }
  service->supported_archs = newest->supported_archs();
  service->toolkit_name = newest->identity().DisplayName();
  service->compile_limit = options.compile.wall_time_per_compile;
  *summary = absl::StrCat("toolkits ", absl::StrJoin(names, ", "),
                          "; a miss compiles in worker processes with the newest one its "
                          "driver loads");
  const ProcessPoolCompiler& first = *pools->front();
  if (first.sandboxed()) {
    spdlog::info("compile workers are sandboxed: {}", first.sandbox());
  } else if (options.allow_unsandboxed_compiles) {
    spdlog::warn(
        "compile workers are {}; compiling what clients send anyway "
        "(--allow-unsandboxed-compiles): a client's #include can read this machine's "
        "files",
        first.sandbox());
  } else {
    spdlog::warn(
        "compile workers are {}; only kernels of the baked stores are compiled, sources "
        "that clients send are refused (--allow-unsandboxed-compiles to accept the risk)",
        first.sandbox());
  }
  return absl::OkStatus();
}

}  // namespace kcache
