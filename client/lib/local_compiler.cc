// LocalCompiler: NVRTC in this process (the engine's compiler and resolve decision), loaded lazily.
#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/lib/api_convert.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/resolve/in_process.h"
#include "kcache/kcache.h"

namespace kcache::client {

struct LocalCompiler::Impl {
  std::string root;
  absl::Mutex mu;
  bool attempted ABSL_GUARDED_BY(mu) = false;
  absl::Status load_status ABSL_GUARDED_BY(mu);
  std::shared_ptr<const Toolkit> toolkit ABSL_GUARDED_BY(mu);
  std::shared_ptr<Compiler> compiler ABSL_GUARDED_BY(mu);

  // The compiler, loading the toolkit on the first call.
  absl::StatusOr<std::shared_ptr<Compiler>> Get() {
    absl::MutexLock lock(&mu);
    if (!attempted) {
      attempted = true;
      absl::StatusOr<std::shared_ptr<const Toolkit>> loaded =
          Toolkit::Load(root.empty() ? Toolkit::DefaultRoot() : root);
      if (loaded.ok()) {
        toolkit = *loaded;
        compiler = NewNvrtcCompiler(toolkit);
      } else {
        load_status = absl::FailedPreconditionError(
            absl::StrCat("cannot compile locally: ", loaded.status().message()));
      }
    }
    if (!load_status.ok()) return load_status;
    return compiler;
  }
};

LocalCompiler::LocalCompiler(std::string toolkit_root) : impl_(std::make_unique<Impl>()) {
  impl_->root = std::move(toolkit_root);
}

LocalCompiler::~LocalCompiler() = default;

std::string LocalCompiler::KernelIdOf(const KernelSource& source) {
  return ComputeKernelId(ToCoreSpec(source)).Hex();
}

absl::StatusOr<FetchedKernel> LocalCompiler::Compile(const KernelSource& source,
                                                     const Device& device) {
  auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (absl::Status s = CheckArchRange(source, device); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<Compiler>> compiler = impl_->Get();
  if (!compiler.ok()) return compiler.status();

  // The engine's decision with no store: the device's SASS when the toolkit supports the SM
  // and the driver loads its output, else PTX for the highest arch below it, else why not.
  KernelRecord record;
  record.spec = ToCoreSpec(source);
  record.id = ComputeKernelId(record.spec);
  record.arch = ArchRange{source.min_arch, source.max_arch};
  Compiler* compilers[] = {compiler->get()};
  absl::StatusOr<InProcessAnswer> resolved = ResolveSpecInProcess(
      record, ::kcache::Device{Sm{device.sm_major, device.sm_minor}, device.driver_version},
      ResolvePolicy{}, compilers);
  if (!resolved.ok()) return resolved.status();
  // The engine's rule and reason, as the daemon would report them (PTX is ptx_jit), and where.
  FetchedKernel kernel = FromCoreArtifact(*resolved->artifact);
  kernel.served_from = ServedFrom::kLocalCompile;
  kernel.rule = static_cast<ServeRule>(resolved->rule);  // same numbering (types.cc)
  kernel.needs_jit = resolved->needs_jit();
  kernel.reason = absl::StrCat(resolved->reason, " (compiled in this process with ",
                               (*compiler)->toolkit().identity().DisplayName(), ")");
  kernel.micros = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  return kernel;
}

}  // namespace kcache::client
