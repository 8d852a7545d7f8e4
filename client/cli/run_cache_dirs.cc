#include "client/cli/run_cache_dirs.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/cache_dir_context.h"
#include "client/cli/commands.h"
#include "client/cli/object_remote.h"
#include "client/cli/output.h"
#include "client/launch/cache_budget.h"
#include "core/environment.h"
#include "core/process_identity.h"
#include "engine/cache_dirs/snapshot_store.h"
#include "engine/objects/store_object_cache.h"

namespace kcache::cli {
namespace {

void Say(const PlannedDir& planned, const std::string& what) {
  std::fprintf(stderr, "kcache: %s: %s\n", planned.spec.name.c_str(), what.c_str());
}

bool Verbose() { return !EnvValue("KCACHE_LOG").empty(); }

}  // namespace

absl::StatusOr<std::vector<PlannedDir>> PlanCacheDirs(const objects::ToolLookup& routed,
                                                      const RunCacheDirsFlags& flags,
                                                      const std::vector<std::string>& command) {
  absl::StatusOr<std::vector<cache_dirs::CacheDirSpec>> specs = CacheDirSpecs(flags.user_dirs);
  if (!specs.ok()) return specs.status();
  absl::StatusOr<KeyContext> keyed = KeyContextFor(routed, flags.arch);
  if (!keyed.ok()) return keyed.status();
  keyed->context.command_line = command;
  std::vector<PlannedDir> planned;
  for (cache_dirs::CacheDirSpec& spec : *specs) {
    absl::StatusOr<std::string> dir = cache_dirs::ResolveCacheDir(spec, keyed->context.env);
    if (!dir.ok()) continue;
    cache_dirs::CacheDirKey key = cache_dirs::KeyFor(spec, *dir, keyed->context);
    planned.push_back(PlannedDir{std::move(spec), *std::move(dir), std::move(key)});
  }
  return planned;
}

absl::StatusOr<std::unique_ptr<objects::ObjectCache>> OpenSnapshotCache(
    const RunCacheDirsFlags& flags, bool lookups) {
  if (!flags.server.empty()) {
    return OpenRemoteObjectCache(
        flags.server,
        lookups ? launch::CacheBudget::FromEnvironment(flags.server, Verbose()) : nullptr);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenLauncherStore(flags.store);
  if (!store.ok()) return store.status();
  return objects::NewOwningStoreObjectCache(*std::move(store));
}

std::vector<ServedCacheDir> ServeCacheDirs(objects::ObjectCache& lookups,
                                           objects::ObjectCache& transfers,
                                           const std::vector<PlannedDir>& planned,
                                           const cache_dirs::SnapshotLimits& limits) {
  std::vector<ServedCacheDir> served_dirs;
  std::vector<std::string> missed;
  for (const PlannedDir& dir : planned) {
    absl::StatusOr<bool> held = cache_dirs::HoldsSnapshot(lookups, dir.key);
    absl::StatusOr<cache_dirs::ServeReport> served =
        !held.ok() ? held.status()
        : *held    ? cache_dirs::ServeSnapshot(transfers, dir.dir, dir.key, limits)
                   : absl::NotFoundError("");
    if (absl::IsNotFound(served.status())) {
      missed.push_back(absl::StrCat(dir.spec.name, " ", dir.key.digest.substr(0, 12)));
      continue;
    }
    if (!served.ok()) {
      Say(dir, absl::StrCat("snapshot ", dir.key.digest.substr(0, 12),
                            " not served: ", served.status().message()));
      if (cache_dirs::CacheUnanswered(served.status())) {
        std::fprintf(stderr,
                     "kcache: cache directories: kcached does not answer; the rest are "
                     "not served\n");
        break;
      }
      continue;
    }
    if (!served->served.empty()) served_dirs.push_back({dir, std::move(served->served)});
    if (served->files_written == 0 && served->refused.empty()) {
      if (Verbose()) {
        Say(dir, absl::StrCat(dir.dir, " has every file of snapshot ", dir.key.digest.substr(0, 12),
                              " already"));
      }
      continue;
    }
    std::string line = absl::StrCat("served ", served->files_written, " files (",
                                    HumanBytes(served->bytes_written), ") into ", dir.dir,
                                    " from snapshot ", dir.key.digest.substr(0, 12));
    if (served->files_present > 0) {
      absl::StrAppend(&line, "; ", served->files_present, " already there, left as they are");
    }
    if (!served->refused.empty()) {
      absl::StrAppend(&line, "; ", served->refused.size(),
                      " refused (first: ", served->refused[0].first, ": ",
                      served->refused[0].second, ")");
    }
    Say(dir, line);
  }
  if (Verbose() && !missed.empty()) {
    std::fprintf(stderr, "kcache: cache directories with no snapshot of their key: %s\n",
                 absl::StrJoin(missed, ", ").c_str());
  }
  return served_dirs;
}

void ReportCacheDirUse(const std::vector<ServedCacheDir>& served, bool report,
                       const cache_dirs::SnapshotLimits& limits) {
  for (const ServedCacheDir& dir : served) {
    absl::StatusOr<cache_dirs::SnapshotListing> now =
        cache_dirs::StatSnapshotFiles(dir.planned.spec, dir.planned.dir, limits);
    cache_dirs::SnapshotUse use =
        cache_dirs::CompareWithServed(dir.files, now.ok() ? *now : cache_dirs::SnapshotListing{});
    std::string counts = absl::StrCat(use.as_served, " as served, ", use.replaced, " replaced, ",
                                      use.removed, " removed, ", use.written_anew, " written anew");
    if (use.Ignored()) {
      std::fprintf(stderr,
                   "kcache: WARNING: %s: the command did not use the %llu files served into %s "
                   "from snapshot %s (%s): the library built them again, so its own key holds "
                   "something kcache's does not, or the snapshot is stale (docs/cache-dirs.md, "
                   "\"Proven used\")\n",
                   dir.planned.spec.name.c_str(), static_cast<unsigned long long>(use.served),
                   dir.planned.dir.c_str(), dir.planned.key.digest.substr(0, 12).c_str(),
                   counts.c_str());
    } else if (report) {
      std::fprintf(stderr, "kcache: report: %s: %llu files served into %s; after the command %s\n",
                   dir.planned.spec.name.c_str(), static_cast<unsigned long long>(use.served),
                   dir.planned.dir.c_str(), counts.c_str());
    }
  }
}

void CaptureCacheDirs(objects::ObjectCache& cache, const std::vector<PlannedDir>& planned,
                      const cache_dirs::SnapshotLimits& limits) {
  std::string put_by = absl::StrCat(ThisProcessInWords(), " (kcache run)");
  for (const PlannedDir& dir : planned) {
    absl::StatusOr<cache_dirs::CaptureReport> captured =
        cache_dirs::CaptureSnapshot(cache, dir.spec, dir.dir, dir.key, limits, put_by);
    if (absl::IsNotFound(captured.status())) continue;  // the library made no directory
    if (absl::IsFailedPrecondition(captured.status())) {
      if (Verbose()) Say(dir, absl::StrCat("not captured: ", captured.status().message()));
      continue;
    }
    if (!captured.ok()) {
      Say(dir, absl::StrCat("not captured: ", captured.status().message()));
      if (cache_dirs::CacheUnanswered(captured.status())) break;
      continue;
    }
    if (captured->kept_baked) {
      Say(dir, absl::StrCat("a baked store holds snapshot ", dir.key.digest.substr(0, 12),
                            ": kept, not replaced"));
      continue;
    }
    if (captured->unchanged) {
      if (Verbose()) {
        Say(dir, absl::StrCat("snapshot ", dir.key.digest.substr(0, 12), " of ", dir.dir,
                              " is kept already, unchanged"));
      }
      continue;
    }
    std::string line = absl::StrCat("captured ", captured->files, " files (",
                                    HumanBytes(captured->bytes), ") of ", dir.dir, " as snapshot ",
                                    dir.key.digest.substr(0, 12), "; ", captured->chunks_stored,
                                    " chunks new, ", captured->chunks_present, " already kept");
    if (!captured->skipped.empty()) {
      absl::StrAppend(&line, "; ", captured->skipped.size(),
                      " left out (first: ", captured->skipped[0].first, ": ",
                      captured->skipped[0].second, ")");
    }
    Say(dir, line);
  }
}

}  // namespace kcache::cli
