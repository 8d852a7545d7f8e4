// The default CUDA toolkit ($CUDA_HOME, else /usr/local/cuda), loaded once per test binary and
// shared by every test that compiles: a load dlopens NVRTC and reads build ids (~30-300 ms).
// Also: where the NVRTC 12.9 wheel is, and a cubin compiled by a toolkit.
//
//   void SetUp() override {
//     absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = kcache::testing::SharedToolkit();
//     ASSERT_TRUE(toolkit.ok()) << toolkit.status();
//   }
#ifndef KCACHE_TESTS_TESTUTIL_TOOLKIT_H_
#define KCACHE_TESTS_TESTUTIL_TOOLKIT_H_

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "absl/status/statusor.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "tests/testutil/tree_paths.h"

namespace kcache::testing {

// The load's result, the same object for every call (a failure too). Thread-safe.
inline const absl::StatusOr<std::shared_ptr<const Toolkit>>& SharedToolkit() {
  static const auto* toolkit =
      new absl::StatusOr<std::shared_ptr<const Toolkit>>(Toolkit::Load(Toolkit::DefaultRoot()));
  return *toolkit;
}

// The root of the NVRTC 12.9 wheel (nvidia-cuda-nvrtc-cu12, requirements/test.txt) in the
// project's .venv, for Toolkit::Load; "" when absent (run scripts/install-deps.sh).
inline std::string Nvrtc129Root() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& lib : fs::directory_iterator(fs::path(SourcePath("")) / ".venv" / "lib", ec)) {
    fs::path root = lib.path() / "site-packages" / "nvidia" / "cuda_nvrtc";
    if (fs::exists(root / "lib" / "libnvrtc.so.12", ec)) return root.string();
  }
  return "";
}

// The cubin `toolkit` compiles from `source` (kernel `name`) for `target` ("sm_90").
inline absl::StatusOr<std::string> CompileCubin(std::shared_ptr<const Toolkit> toolkit,
                                                const std::string& name, const std::string& source,
                                                const std::string& target) {
  CompileJob job;
  job.spec.name = name;
  job.spec.source = source;
  job.id = ComputeKernelId(job.spec);
  absl::StatusOr<Target> parsed = ParseTarget(target);
  if (!parsed.ok()) return parsed.status();
  job.target = *parsed;
  absl::StatusOr<CompileOutput> out = NewNvrtcCompiler(std::move(toolkit))->Compile(job);
  if (!out.ok()) return out.status();
  for (Artifact& artifact : out->artifacts) {
    if (artifact.meta.key.kind == ArtifactKind::kCubin) return std::move(artifact.bytes);
  }
  return absl::NotFoundError("the compile gave no cubin");
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_TOOLKIT_H_
