// libkcache-cuda.so: the cache's half of kcache's libcuda.so.1 stand-in (cuda_cache_abi.h), loaded
// into the caller's process at its first module or library load. For each load it reads the
// caller's image, plans it as `kcache warm --library` plans a library (engine/fatbin/load_plan.h)
// and, when the image lacks SASS for the GPU but has PTX kcache could have built it from, asks
// kcached's fast path for the SASS of that PTX module, this GPU and this driver. The SASS handed
// back is checked to run on the GPU (core/load_check.h), kept for the life of the process, and
// given to the driver in place of the image. When kcached holds none, and the load keys no JIT
// option, the PTX is handed to `kcache cuda-build-ptx` (a process of its own: the load does not
// wait), which asks kcached to build that SASS for the next load (BuildFromPtx).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cuda/cuda_cache_abi.h"
#include "client/launch/cache_budget.h"
#include "client/launch/fast_object_cache.h"
#include "client/launch/helper_processes.h"
#include "client/launch/unresponsive_mark.h"
#include "client/lib/fast_path.h"
#include "core/cubin.h"
#include "core/environment.h"
#include "core/load_check.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/load_plan.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache::cuda {
namespace {

// A lookup's time when KCACHE_CUDA_TIMEOUT_MS does not say: a served load takes well under a
// millisecond, and a load this misses pays this at most; a kcached that lets it run out is
// marked unresponsive and not asked again until the mark expires (unresponsive_mark.h).
constexpr absl::Duration kDefaultBudget = absl::Milliseconds(50);
// The largest image read: a fatbin that declares more is left to the driver.
constexpr uint64_t kMaxImageBytes = uint64_t{1} << 30;
// `kcache cuda-build-ptx` processes running at once; a miss past them is not built (a load never
// waits for one).
constexpr size_t kMaxBuildRequests = 4;
// "\x7f" "ELF", as a little-endian u32: a cubin.
constexpr uint32_t kElfMagic = 0x464C457F;

struct Process {
  std::string server;
  bool log = false;
  absl::Duration budget = kDefaultBudget;
  std::shared_ptr<client::FastPath> fast;           // null without a kcached fast path to ask
  bool build = true;                                // KCACHE_CUDA_BUILD is not "0"
  std::unique_ptr<launch::HelperProcesses> builds;  // the `kcache cuda-build-ptx` processes
  std::mutex mutex;                                 // guards served and asked
  // The SASS handed to the driver, by module id and GPU: kept for the life of the process (the
  // driver may keep reading an image it was given), each distinct one once.
  std::map<std::string, std::unique_ptr<std::string>> served;
  std::set<std::string> asked;  // module id and GPU asked to be built: each once per process
};

Process& TheProcess() {
  static Process* process = [] {
    auto* made = new Process;
    made->server = EnvValue("KCACHE_SERVER");
    made->log = EnvValue("KCACHE_LOG") == "1";
    int64_t ms = 0;
    if (absl::SimpleAtoi(EnvValue("KCACHE_CUDA_TIMEOUT_MS"), &ms) && ms > 0) {
      made->budget = absl::Milliseconds(ms);
    }
    made->fast = launch::FastPathTo(made->server);
    made->build = EnvValue("KCACHE_CUDA_BUILD") != "0";
    made->builds = std::make_unique<launch::HelperProcesses>(
        launch::FindKcacheBeside(reinterpret_cast<void*>(&TheProcess)), kMaxBuildRequests);
    std::atexit([] { TheProcess().builds->Reap(true); });
    if (made->log && made->fast == nullptr) {
      std::fprintf(stderr, "kcache: cuda: kcached at %s has no fast path: loads go to the driver\n",
                   made->server.c_str());
    }
    return made;
  }();
  return *process;
}

void Say(const Process& process, const KcacheCudaLoad& load, const std::string& line) {
  if (process.log) {
    std::fprintf(stderr, "kcache: cuda: %s on %d.%d: %s\n", load.function, load.sm_major,
                 load.sm_minor, line.c_str());
  }
}

// The caller's image as bytes, and what they are; false for an image kcache does not serve from
// (a cubin, relocatable code a wrapper names, anything unknown).
bool ImageBytes(const void* image, absl::string_view* bytes, fatbin::ImageKind* kind,
                std::string* why) {
  const auto* p = static_cast<const unsigned char*>(image);
  uint32_t magic = 0;
  // Each magic below is 4 bytes without a NUL: a shorter text is none of them (and is not read
  // past its NUL).
  if (strnlen(static_cast<const char*>(image), sizeof magic) == sizeof magic) {
    std::memcpy(&magic, p, sizeof magic);
  }
  if (magic == fatbin::kFatbinWrapperMagic) {
    // {int magic; int version; const unsigned long long* data; void* filename_or_fatbins}
    int32_t version = 0;
    const void* data = nullptr;
    std::memcpy(&version, p + 4, sizeof version);
    std::memcpy(&data, p + 8, sizeof data);
    if (version != 1 || data == nullptr) {
      *why = absl::StrCat("a fatbin wrapper of version ", version, " (relocatable code)");
      return false;
    }
    p = static_cast<const unsigned char*>(data);
    std::memcpy(&magic, p, sizeof magic);
  }
  if (magic == fatbin::kFatbinMagic) {
    uint64_t data_size = 0;
    std::memcpy(&data_size, p + 8, sizeof data_size);
    if (data_size > kMaxImageBytes) {
      *why = absl::StrCat("a fatbin that declares ", data_size, " bytes");
      return false;
    }
    *bytes =
        absl::string_view(reinterpret_cast<const char*>(p), fatbin::kFatbinHeaderSize + data_size);
    *kind = fatbin::ImageKind::kFatbin;
    return true;
  }
  if (magic == kElfMagic) {
    *why = "a cubin (SASS already)";
    return false;
  }
  // PTX text: the driver reads it up to its NUL, and so does this.
  const char* text = reinterpret_cast<const char*>(p);
  size_t length = strnlen(text, kMaxImageBytes);
  absl::string_view ptx(text, length);
  if (length == kMaxImageBytes || ptx.find(".version") == absl::string_view::npos ||
      ptx.find(".target") == absl::string_view::npos) {
    *why = "neither a fatbin, a cubin nor PTX";
    return false;
  }
  *bytes = ptx;
  *kind = fatbin::ImageKind::kPtx;
  return true;
}

// The SASS kcached holds for `module` on the load's GPU, checked to run there; nullopt (said why)
// when there is none to hand over. `*holds_none`: kcached was asked, in time, and holds none.
std::optional<std::string> Fetch(Process& process, const KcacheCudaLoad& load,
                                 const KernelId& module, bool* holds_none) {
  *holds_none = false;
  if (process.fast == nullptr) return std::nullopt;
  auto budget = std::make_shared<launch::CacheBudget>(
      process.budget, launch::UnresponsiveMark::FromEnvironment(process.server), process.log,
      "KCACHE_CUDA_TIMEOUT_MS");
  if (budget->CompileWithoutAsking()) return std::nullopt;
  v1::ResolveRequest request;
  request.set_kernel_id(std::string(module.Bytes()));
  request.mutable_device()->set_sm_major(static_cast<uint32_t>(load.sm_major));
  request.mutable_device()->set_sm_minor(static_cast<uint32_t>(load.sm_minor));
  request.mutable_device()->set_driver_version(static_cast<uint32_t>(load.driver));
  request.set_no_compile(true);
  request.set_client("libkcache-cuda");
  launch::CacheBudget::Call call = budget->Begin();
  client::FastPath::Answer answer = process.fast->Resolve(request, call.deadline);
  budget->End(call, answer.has_value());
  // The fast path answers a miss with nothing, as it does a call past its deadline.
  *holds_none = answer.has_value() ? absl::IsNotFound(answer->status()) : !budget->timed_out();
  if (!answer.has_value() || !answer->ok()) {
    Say(process, load,
        absl::StrCat("no SASS from kcache for PTX module ", module.ShortHex(), " (",
                     !answer.has_value() ? "kcached holds none, or did not answer in time"
                                         : answer->status().message(),
                     "): the driver JITs it"));
    return std::nullopt;
  }
  const client::FetchedKernel& kernel = **answer;
  absl::string_view bytes = kernel.data();
  LoadingGpu gpu{0, "", Sm{load.sm_major, load.sm_minor}, static_cast<uint32_t>(load.driver)};
  absl::Status runs =
      kernel.kind != client::ArtifactKind::kCubin || kernel.needs_jit
          ? absl::FailedPreconditionError(absl::StrCat("it is ", kernel.target, ", not SASS"))
          : CheckArtifactForGpu(
                LoadingArtifact{"the SASS", ArtifactKind::kCubin, kernel.target, kernel.min_driver},
                gpu);
  absl::StatusOr<int> elf_arch = CubinSmArch(bytes);
  absl::StatusOr<Target> target = ParseTarget(kernel.target);
  if (runs.ok() && (!elf_arch.ok() || !target.ok() || *elf_arch != target->sm.arch())) {
    runs = absl::DataLossError(absl::StrCat("its ELF is not a cubin for ", kernel.target));
  }
  if (!runs.ok()) {
    Say(process, load,
        absl::StrCat("kcache's answer for PTX module ", module.ShortHex(),
                     " is not given to the driver: ", runs.message()));
    return std::nullopt;
  }
  return std::string(bytes);
}

// Hands `ptx` to `kcache cuda-build-ptx`, which asks kcached to build the SASS of `module` for
// the load's GPU for the next load; once per module and GPU in this process.
void AskToBuild(Process& process, const KcacheCudaLoad& load, const KernelId& module,
                const std::string& ptx) {
  if (!process.build) return;
  Sm gpu{load.sm_major, load.sm_minor};
  {
    std::lock_guard<std::mutex> lock(process.mutex);
    if (!process.asked.insert(absl::StrCat(module.Bytes(), gpu.ToString())).second) return;
  }
  absl::Status started =
      process.builds->Start({"cuda-build-ptx", "--server", process.server, "--device",
                             gpu.ToString(), "--driver", absl::StrCat(load.driver), "--client",
                             absl::StrCat("libkcache-cuda pid ", getpid()), "--quiet"},
                            ptx, absl::ZeroDuration());
  Say(process, load,
      started.ok() ? absl::StrCat("asked kcached to build the SASS of PTX module ",
                                  module.ShortHex(), " for the next load")
                   : absl::StrCat("PTX module ", module.ShortHex(),
                                  " is not sent to be built: ", started.message()));
}

}  // namespace
}  // namespace kcache::cuda

extern "C" {

__attribute__((visibility("default"))) int kcache_cuda_abi(void) { return KCACHE_CUDA_CACHE_ABI; }

__attribute__((visibility("default"))) void kcache_cuda_begin(void) {
  kcache::cuda::Process& process = kcache::cuda::TheProcess();
  if (process.fast != nullptr) process.fast->Begin();
}

__attribute__((visibility("default"))) const void* kcache_cuda_sass_for(const KcacheCudaLoad* load,
                                                                        size_t* size) {
  using namespace kcache;  // NOLINT(build/namespaces): the C interface's one function body
  cuda::Process& process = cuda::TheProcess();
  absl::Time start = absl::Now();
  absl::string_view bytes;
  fatbin::ImageKind kind = fatbin::ImageKind::kFatbin;
  std::string why;
  if (!cuda::ImageBytes(load->image, &bytes, &kind, &why)) {
    cuda::Say(process, *load, absl::StrCat("left to the driver: the image is ", why));
    return nullptr;
  }
  std::vector<fatbin::JitOption> options;
  for (unsigned i = 0; i < load->num_options; ++i) {
    options.push_back(fatbin::JitOption{
        load->options[i], static_cast<uint64_t>(reinterpret_cast<uintptr_t>(
                              load->option_values != nullptr ? load->option_values[i] : nullptr))});
  }
  Sm gpu{load->sm_major, load->sm_minor};
  fatbin::LoadPlan plan = fatbin::PlanLoad(bytes, kind, gpu, options);
  if (!plan.module.has_value()) {
    cuda::Say(process, *load, absl::StrCat("left to the driver: ", plan.why));
    return nullptr;
  }
  std::string held_key = absl::StrCat(plan.module->Bytes(), gpu.ToString(), "/", load->driver);
  {
    std::lock_guard<std::mutex> lock(process.mutex);
    auto it = process.served.find(held_key);
    if (it != process.served.end()) {
      *size = it->second->size();
      return it->second->data();
    }
  }
  bool holds_none = false;
  std::optional<std::string> sass = cuda::Fetch(process, *load, *plan.module, &holds_none);
  if (!sass.has_value()) {
    if (holds_none && !plan.buildable_ptx.empty()) {
      cuda::AskToBuild(process, *load, *plan.module, plan.buildable_ptx);
    }
    return nullptr;
  }
  const std::string* kept;
  {
    std::lock_guard<std::mutex> lock(process.mutex);
    auto [it, inserted] =
        process.served.emplace(held_key, std::make_unique<std::string>(*std::move(sass)));
    kept = it->second.get();
  }
  cuda::Say(process, *load,
            absl::StrCat("SASS served by kcache for ", plan.ptx, ": ", kept->size(), " B in ",
                         absl::FormatDuration(absl::Now() - start)));
  *size = kept->size();
  return kept->data();
}

__attribute__((visibility("default"))) void kcache_cuda_sass_loaded(const KcacheCudaLoad* load,
                                                                    const void* sass, int result) {
  (void)sass;
  if (result == 0) return;
  kcache::cuda::Say(kcache::cuda::TheProcess(), *load,
                    absl::StrCat("the driver refused kcache's SASS (CUresult ", result,
                                 "): the caller's image is loaded instead"));
}

}  // extern "C"
