#include "engine/warm/warm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/artifact.h"
#include "engine/compile/compiler.h"
#include "engine/compile/toolkit.h"
#include "engine/store/store.h"

namespace kcache {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MicrosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

std::string SkipReason(const WarmJob& job) {
  const ArchRange& range = job.kernel->record.arch;
  int arch = job.target.sm.arch();
  if (range.min_arch != 0 && arch < range.min_arch) {
    return absl::StrCat("below the kernel's min_arch ", SmFromArch(range.min_arch).ToString());
  }
  return absl::StrCat("above the kernel's max_arch ", SmFromArch(range.max_arch).ToString());
}

// Runs one job: skip, find everything already stored, or compile and store.
WarmJobResult RunJob(const WarmJob& job, Store& store, Compiler& compiler) {
  WarmJobResult result;
  result.job = job;
  Clock::time_point start = Clock::now();
  const KernelRecord& record = job.kernel->record;
  if (!record.arch.Contains(job.target.sm.arch())) {
    result.outcome = WarmOutcome::kSkipped;
    result.message = SkipReason(job);
    return result;
  }

  // Stored means readable and listed: an artifact whose listing entry was lost would be
  // invisible to resolves, so it is written again (which rebuilds the entry).
  std::set<ArtifactKey> listed;
  if (absl::StatusOr<std::vector<ArtifactMeta>> metas = store.ListArtifacts(record.id);
      metas.ok()) {
    for (const ArtifactMeta& meta : *metas) listed.insert(meta.key);
  }
  CompileJob compile_job{record.spec, record.id, job.target, record.want_ltoir, {}, {}};
  bool all_stored = true;
  for (const ArtifactKey& key : compile_job.ExpectedKeys(compiler.toolkit().identity().id)) {
    absl::StatusOr<Artifact> found = store.Get(key);
    if (found.ok() && !listed.contains(key)) {
      if (absl::Status s = store.Put(*found); !s.ok()) found = s;
      result.message = "listing entries rebuilt";
    }
    if (!found.ok()) {
      all_stored = false;
      break;
    }
    result.bytes += found->bytes.size();
    result.kinds.emplace_back(ArtifactKindName(key.kind));
  }
  if (all_stored) {
    result.outcome = WarmOutcome::kCached;
    result.micros = MicrosSince(start);
    return result;
  }

  result.bytes = 0;
  result.kinds.clear();
  absl::StatusOr<CompileOutput> output = compiler.Compile(compile_job);
  result.micros = MicrosSince(start);
  if (!output.ok()) {
    result.outcome = WarmOutcome::kFailed;
    result.message = std::string(output.status().message());
    return result;
  }
  for (const Artifact& artifact : output->artifacts) {
    if (absl::Status s = store.Put(artifact); !s.ok()) {
      result.outcome = WarmOutcome::kFailed;
      result.message = absl::StrCat("storing ", artifact.meta.key.ToString(), ": ", s.message());
      return result;
    }
    result.bytes += artifact.bytes.size();
    result.kinds.emplace_back(ArtifactKindName(artifact.meta.key.kind));
  }
  result.outcome = WarmOutcome::kBuilt;
  return result;
}

}  // namespace

absl::string_view WarmOutcomeName(WarmOutcome outcome) {
  switch (outcome) {
    case WarmOutcome::kBuilt:
      return "built";
    case WarmOutcome::kCached:
      return "cached";
    case WarmOutcome::kSkipped:
      return "skipped";
    case WarmOutcome::kFailed:
      return "failed";
  }
  return "?";
}

std::vector<WarmJob> PlanWarm(const Manifest& manifest, const std::vector<Target>& targets,
                              Store& store) {
  std::vector<WarmJob> jobs;
  for (const ManifestKernel& kernel : manifest.kernels) {
    // The best estimate is what this kernel took last time; then the manifest's hint; then
    // the amount of source NVRTC has to read.
    int64_t expected_ms = 0;
    if (absl::StatusOr<std::vector<ArtifactMeta>> seen = store.ListArtifacts(kernel.record.id);
        seen.ok()) {
      for (const ArtifactMeta& meta : *seen) {
        expected_ms = std::max<int64_t>(expected_ms, meta.compile_micros / 1000);
      }
    }
    if (expected_ms == 0) expected_ms = kernel.cost_ms;
    if (expected_ms == 0) {
      size_t bytes = kernel.record.spec.source.size();
      for (const auto& [name, content] : kernel.record.spec.headers) bytes += content.size();
      expected_ms = 50 + static_cast<int64_t>(bytes / 100);
    }
    for (const Target& target : targets) jobs.push_back(WarmJob{&kernel, target, expected_ms});
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const WarmJob& a, const WarmJob& b) {
    return a.expected_ms > b.expected_ms;
  });
  return jobs;
}

absl::StatusOr<WarmSummary> Warm(const Manifest& manifest, const WarmOptions& options, Store& store,
                                 Compiler& compiler, WarmObserver* observer) {
  Clock::time_point start = Clock::now();
  for (const ManifestKernel& kernel : manifest.kernels) {
    KernelRecord record = kernel.record;
    record.registered_unix_ms = NowUnixMillis();
    if (absl::Status s = store.PutKernel(record); !s.ok()) return s;
  }

  std::vector<WarmJob> jobs = PlanWarm(manifest, options.targets, store);
  WarmObserver quiet;
  if (observer == nullptr) observer = &quiet;
  observer->OnPlan(jobs);

  int threads = options.jobs > 0 ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<int>(threads, std::max<size_t>(jobs.size(), 1));
  WarmSummary summary;
  absl::Mutex mu;  // serializes observer calls and guards `summary`
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      {
        absl::MutexLock lock(&mu);
        observer->OnJobStart(jobs[i]);
      }
      WarmJobResult result = RunJob(jobs[i], store, compiler);
      absl::MutexLock lock(&mu);
      switch (result.outcome) {
        case WarmOutcome::kBuilt:
          ++summary.built;
          break;
        case WarmOutcome::kCached:
          ++summary.cached;
          break;
        case WarmOutcome::kSkipped:
          ++summary.skipped;
          break;
        case WarmOutcome::kFailed:
          ++summary.failed;
          break;
      }
      summary.results.push_back(std::move(result));
      observer->OnJobDone(summary.results.back(), static_cast<int>(summary.results.size()),
                          static_cast<int>(jobs.size()));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  summary.wall_micros = MicrosSince(start);
  return summary;
}

}  // namespace kcache
