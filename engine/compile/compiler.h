// Compiler: turns (KernelSpec, Target) into artifacts. The NVRTC implementation compiles in
// the calling process; a worker-process pool (daemon) implements the same interface.
#ifndef KCACHE_ENGINE_COMPILE_COMPILER_H_
#define KCACHE_ENGINE_COMPILE_COMPILER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "engine/compile/compile_status.h"

namespace kcache {

class Toolkit;

// Who waits for a job: what a worker pool's queue orders by (docs/compile-workers.md,
// "Queueing"). The in-process compiler runs at once and ignores it; it never crosses to a
// worker.
struct CompileDemand {
  std::string client;  // the caller as its requests name it ("" = anonymous)
  // True while someone still waits for the result; a job nobody wants leaves the queue
  // (a running compile finishes, for the cache). Null: always wanted (warm, background).
  // Called from the queue's thread, with the queue's lock held: cheap, takes no other lock
  // that a Compile caller may hold.
  std::function<bool()> wanted;
  // Where the job is, for those who wait for it: a worker pool's queue sets queued (with its
  // place) and compiling; null: nobody reads it. Shared by every caller of one compile.
  std::shared_ptr<CompileStatus> status;
};

struct CompileJob {
  KernelSpec spec;
  KernelId id;              // ComputeKernelId(spec), computed by the caller once
  Target target;            // sm_XX[a|f] (gives CUBIN + PTX) or compute_XX[a|f] (PTX only)
  bool want_ltoir = false;  // also produce LTO-IR for compute_XX (a separate NVRTC pass)
  CompileDemand demand;
  // Non-empty: the job builds SASS from this PTX module instead of compiling `spec` with NVRTC.
  // nvJitLink compiles it for `target` (an sm_ target) with spec.options after -arch (only -O0
  // to -O3 are taken: IsPtxJobOption), and the job gives the cubin alone, checked to be a
  // cubin for that SM (Internal otherwise), as engine/fatbin/ptx_sass.h stores SASS built from
  // PTX: keyed PtxSassKey(id, target), its origin spec.name and the PTX's own .target
  // (InvalidArgument when it has none). The caller chooses `id` (fatbin::PtxModuleId).
  std::string ptx;

  // The keys of what this job writes with toolkit `toolkit_id`: the cubin (SASS targets),
  // the PTX for the same arch, and LTO-IR for it when asked; a PTX job's cubin alone. A store
  // holding all of them has nothing left for the job to do (warm and the daemon's compile flights
  // look first).
  std::vector<ArtifactKey> ExpectedKeys(const std::string& toolkit_id) const;
};

struct CompileOutput {
  // CUBIN for sm targets, PTX always, LTO-IR when asked. Metadata filled in: key (with the
  // toolkit id), kernel name, lowered names, log, compile time, created time, min driver.
  std::vector<Artifact> artifacts;
  // How long the job waited for a free compiler before it started (a worker pool's queue);
  // 0 for a compile run at once in the calling thread.
  int64_t queued_micros = 0;
  // CPU time the compile used (user + system), where the compiler measures it (a worker
  // pool's worker reports its own); 0 when it does not.
  int64_t cpu_micros = 0;
};

// Errors: InvalidArgument for a rejected option or unsupported target (message lists what is
// allowed); Aborted for a compile error, with the full NVRTC log in the message and in the
// payload kCompileLogPayload; Internal for an NVRTC failure that is not the source's fault.
inline constexpr char kCompileLogPayload[] = "kcache.dev/compile-log";

class Compiler {
 public:
  virtual ~Compiler() = default;
  // Thread-safe: several compiles may run at once.
  virtual absl::StatusOr<CompileOutput> Compile(const CompileJob& job) = 0;
  virtual const Toolkit& toolkit() const = 0;
};

// Compiles with NVRTC in this process. -frandom-seed is derived from the artifact key, so the
// same job gives the same bytes in any process.
std::unique_ptr<Compiler> NewNvrtcCompiler(std::shared_ptr<const Toolkit> toolkit);

// Links LTO-IR (one or more modules) into a cubin for `target` (an sm_ target) with
// nvJitLink. FailedPrecondition when the toolkit has no nvJitLink; Aborted with the link log
// when nvJitLink refuses (e.g. compute_90 LTO-IR to sm_86).
absl::StatusOr<std::string> LinkLtoir(const Toolkit& toolkit,
                                      const std::vector<std::string>& ltoir_modules,
                                      const Target& target, std::string* log = nullptr);

// Compiles one PTX module into a cubin for `target` (an sm_ target) with nvJitLink, passing
// `options` after -arch (ptxas options as nvJitLink takes them, e.g. "-O3"). The same errors as
// LinkLtoir; Aborted with nvJitLink's log when the PTX does not compile for the target (PTX of a
// higher arch, or compute_90a PTX for anything but sm_90a).
absl::StatusOr<std::string> LinkPtx(const Toolkit& toolkit, const std::string& ptx,
                                    const Target& target, const std::vector<std::string>& options,
                                    std::string* log = nullptr);

// Whether a PTX job (CompileJob::ptx) takes `option`: -O0, -O1, -O2 or -O3.
bool IsPtxJobOption(absl::string_view option);

// The compile log carried by a compile error, or "" if none.
std::string CompileLogOf(const absl::Status& status);

// The -frandom-seed value every compile of (id, target) with
// toolkit `toolkit_id` passes: "0x" + the first 8 hex digits of SHA-256 over a tagged framing
// of the kernel id, the PTX form of the target and the toolkit id. The PTX form is used so that
// an sm_86 compile and a compute_86 compile share a seed and yield the same compute_86 PTX.
// 8 digits, not more: NVRTC 13.0 is deterministic only for numeric seeds up to 32 bits.
std::string RandomSeedFor(const KernelId& id, const Target& target, absl::string_view toolkit_id);

}  // namespace kcache

#endif  // KCACHE_ENGINE_COMPILE_COMPILER_H_
