// What a worker gets for the bundled kernels: a real kcached on a temp unix socket with a temp
// store warms kernels/manifest.yaml for one device's SM (through libkcache's Client::Warm, so
// the daemon's own compile workers build them), then every kernel is fetched through
// Client::Resolve with daemon-side compiling off and no local fallback, so an answer can only
// come from what the warm stored. Needs no GPU: tests/unit/gpu_launcher_logic_test.cc runs it
// for a pretend device; the GPU suite runs it for the real one. Header-only.
#ifndef KCACHE_TESTS_GPU_SERVED_KERNELS_H_
#define KCACHE_TESTS_GPU_SERVED_KERNELS_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/cubin.h"
#include "core/manifest.h"
#include "kcache/kcache.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/tree_paths.h"

namespace kcache::gpu_test {

inline std::string BundledManifestPath() { return testing::SourcePath("kernels/manifest.yaml"); }

// Names of the manifest's kernels whose declared arch range holds `arch` (e.g. 89), in order.
inline std::vector<std::string> KernelsForArch(const Manifest& manifest, int arch) {
  std::vector<std::string> names;
  for (const ManifestKernel& k : manifest.kernels) {
    if (k.record.arch.Contains(arch)) names.push_back(k.record.spec.name);
  }
  return names;
}

// The target the exact-SASS rule serves a device: "sm_89" for 8.9.
inline std::string ExactTarget(const client::Device& device) {
  return absl::StrCat("sm_", device.arch());
}

// OK when `kernel` is what the serving rules must hand `device` after a warm for its SM: a
// cubin whose target is exactly sm_<device> (by the metadata and by the ELF header's SM),
// served under the exact-SASS rule, by the daemon.
inline absl::Status CheckExactCubin(const client::FetchedKernel& kernel,
                                    const client::Device& device) {
  const std::string what = absl::StrCat(kernel.kernel_name, " for ", device.ToString());
  if (!kernel.from_daemon()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " was compiled locally (", kernel.reason, "), not served by kcached"));
  }
  if (kernel.kind != client::ArtifactKind::kCubin) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " was served as ", client::ArtifactKindName(kernel.kind), ", not a cubin"));
  }
  if (kernel.target != ExactTarget(device)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " was served for ", kernel.target, ", not ", ExactTarget(device)));
  }
  if (kernel.rule != client::ServeRule::kExactSass) {
    return absl::FailedPreconditionError(absl::StrCat(what, " was served under rule ",
                                                      client::ServeRuleName(kernel.rule),
                                                      ", not exact_sass (", kernel.reason, ")"));
  }
  absl::StatusOr<int> elf_arch = CubinSmArch(kernel.data());
  if (!elf_arch.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the served bytes are not a cubin: ", elf_arch.status().message()));
  }
  if (*elf_arch != device.arch()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": the cubin's ELF header says sm_",
                                                      *elf_arch, ", not ", ExactTarget(device)));
  }
  return absl::OkStatus();
}

// A kcached with the given kernels warmed for one device, and what it served for each.
class ServedKernels {
 public:
  struct Options {
    std::string toolkit_root;  // --toolkit for the daemon; "" = its default
    absl::Duration warm_deadline = absl::Minutes(10);
    absl::Duration resolve_deadline = absl::Seconds(30);
  };

  // Starts kcached, warms `names` (manifest kernel names, each of whose arch range must hold
  // the device) for ExactTarget(device) through Client::Warm, and resolves each of them. Any
  // failure (daemon start, a failed warm job, a resolve error) is returned with the daemon's
  // log.
  static absl::StatusOr<std::unique_ptr<ServedKernels>> Start(const Manifest& manifest,
                                                              const std::vector<std::string>& names,
                                                              const client::Device& device,
                                                              const Options& options) {
    std::unique_ptr<ServedKernels> served(new ServedKernels(options));
    if (absl::Status s = served->Run(manifest, names, device); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat(s.message(), "\n--- kcached log ---\n", served->daemon_.Log()));
    }
    return served;
  }

  // The kernel served for `name`, or null when it was not asked for.
  const client::FetchedKernel* Find(const std::string& name) const {
    auto it = kernels_.find(name);
    return it == kernels_.end() ? nullptr : &it->second;
  }
  const std::map<std::string, client::FetchedKernel>& kernels() const { return kernels_; }
  const client::WarmTotals& warm_totals() const { return totals_; }
  int64_t warm_micros() const { return warm_micros_; }
  std::string daemon_log() const { return daemon_.Log(); }

 private:
  static testing::DaemonOptions DaemonOptionsFor(const Options& options) {
    testing::DaemonOptions daemon;
    if (!options.toolkit_root.empty()) daemon.extra_flags = {"--toolkit", options.toolkit_root};
    return daemon;
  }
  explicit ServedKernels(const Options& options)
      : options_(options), daemon_(DaemonOptionsFor(options)) {}

  absl::Status Run(const Manifest& manifest, const std::vector<std::string>& names,
                   const client::Device& device) {
    absl::StatusOr<std::vector<client::KernelSource>> all =
        client::LoadManifestKernels(manifest.path);
    if (!all.ok()) return all.status();
    std::vector<client::KernelSource> sources;
    for (const std::string& name : names) {
      const ManifestKernel* kernel = manifest.Find(name);
      if (kernel == nullptr) {
        return absl::NotFoundError(absl::StrCat("no kernel '", name, "' in ", manifest.path));
      }
      if (!kernel->record.arch.Contains(device.arch())) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, " does not support ", device.ToString(), " (its declared arch range)"));
      }
      sources.push_back((*all)[kernel - manifest.kernels.data()]);  // same order as the manifest
    }
    if (absl::Status s = daemon_.Start(); !s.ok()) return s;
    client::ClientOptions client_options;
    client_options.address = daemon_.address();
    client_options.deadline = options_.resolve_deadline;
    client_options.local_compile_fallback = false;  // only what the daemon serves counts
    client_options.breaker_failures = 0;
    client_options.client_name = "kernels-gpu-test";
    absl::StatusOr<std::unique_ptr<client::Client>> client =
        client::Client::Connect(client_options);
    if (!client.ok()) return client.status();

    std::vector<std::string> failures;
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<client::WarmTotals> totals = (*client)->Warm(
        sources, {ExactTarget(device)}, /*jobs=*/0, options_.warm_deadline,
        [&failures](const client::WarmJobEvent& job) {
          if (job.outcome == "failed") {
            failures.push_back(absl::StrCat(job.kernel_name, " ", job.target, ": ", job.message));
          }
        });
    warm_micros_ = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    if (!totals.ok()) return totals.status();
    totals_ = *totals;
    if (totals_.failed > 0 || !failures.empty()) {
      return absl::InternalError(absl::StrCat("warming ", ExactTarget(device),
                                              " failed: ", absl::StrJoin(failures, "\n")));
    }

    client::CallOptions call;
    call.allow_daemon_compile = false;  // served from the warmed store, or an error
    for (size_t k = 0; k < names.size(); ++k) {
      absl::StatusOr<client::FetchedKernel> fetched = (*client)->Resolve(sources[k], device, call);
      if (!fetched.ok()) {
        return absl::Status(fetched.status().code(),
                            absl::StrCat("resolving ", names[k], " for ", device.ToString(),
                                         " after the warm: ", fetched.status().message()));
      }
      kernels_.emplace(names[k], *std::move(fetched));
    }
    return absl::OkStatus();
  }

  Options options_;
  testing::DaemonProcess daemon_;
  std::map<std::string, client::FetchedKernel> kernels_;
  client::WarmTotals totals_;
  int64_t warm_micros_ = 0;
};

}  // namespace kcache::gpu_test

#endif  // KCACHE_TESTS_GPU_SERVED_KERNELS_H_
