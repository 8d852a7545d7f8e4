// The inference libraries' cache directories under `kcache run` (docs/cache-dirs.md): before
// the command starts, each directory is filled from the snapshot whose key matches this
// environment's; once the command has exited 0, each directory that holds files is captured
// into the store or kcached, under the key of the environment it was made in.
#ifndef KCACHE_CLIENT_CLI_RUN_CACHE_DIRS_H_
#define KCACHE_CLIENT_CLI_RUN_CACHE_DIRS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cache_dirs/cache_dir_key.h"
#include "engine/cache_dirs/cache_dir_table.h"
#include "engine/cache_dirs/snapshot_files.h"
#include "engine/keys/compiler_tools.h"
#include "engine/objects/object_cache.h"

namespace kcache::cli {

struct RunCacheDirsFlags {
  bool off = false;     // --no-cache-dirs
  bool report = false;  // --report: what became of each served directory
  // --cache-dir-max-files, --cache-dir-max-file-bytes, --cache-dir-max-bytes: what one
  // directory's snapshot may hold, served or captured (past them, files are left out, said so)
  cache_dirs::SnapshotLimits limits;
  std::vector<std::string> user_dirs;  // --cache-dir NAME=DIR[:PREFIX,...]
  std::string arch;                    // --arch: the SMs when no GPU is seen
  std::string store, server;           // where snapshots are kept: exactly one
};

// A directory of this environment with its key.
struct PlannedDir {
  cache_dirs::CacheDirSpec spec;
  std::string dir;
  cache_dirs::CacheDirKey key;
};

// Each directory `routed` (the environment the command runs in) has, with its key; directories
// that cannot be said (HOME unset) are left out. InvalidArgument for a --cache-dir or --arch
// that does not parse.
absl::StatusOr<std::vector<PlannedDir>> PlanCacheDirs(const objects::ToolLookup& routed,
                                                      const RunCacheDirsFlags& flags,
                                                      const std::vector<std::string>& command);

// Where the snapshots are: the --store directory (opened as a launcher opens it, waiting while
// one holds it) or kcached (--server; a listing waits 5 s at most, a transfer 60 s:
// object_remote.h). `lookups`: kcached's calls share one launcher's budget
// (KCACHE_TIMEOUT_MS, client/launch/cache_budget.h) instead, for the questions asked before the
// command starts.
absl::StatusOr<std::unique_ptr<objects::ObjectCache>> OpenSnapshotCache(
    const RunCacheDirsFlags& flags, bool lookups = false);

// Fills each planned directory from its snapshot, saying on stderr what each got, and returns
// those served: "kcache:
// triton: served 12 files (1.2 MiB) into DIR". Whether a snapshot is there is asked of `lookups`
// (OpenSnapshotCache's, budgeted), its files read from `transfers`. A directory with no snapshot
// of its key is left as it is (quiet unless KCACHE_LOG is set); a snapshot that does not check is
// said and left. Once kcached does not answer (Unavailable, DeadlineExceeded) the rest are not
// asked for: a kcached away or hung costs the command one launcher's budget.
// A directory served, with the files it was given (ServeReport::served).
struct ServedCacheDir {
  PlannedDir planned;
  std::vector<cache_dirs::SnapshotFile> files;
};
std::vector<ServedCacheDir> ServeCacheDirs(objects::ObjectCache& lookups,
                                           objects::ObjectCache& transfers,
                                           const std::vector<PlannedDir>& planned,
                                           const cache_dirs::SnapshotLimits& limits = {});

// Once the command has run (whatever its exit), what became of each served directory
// (CompareWithServed): with `report`, a line each ("kcache: report: triton: 12 files served
// into DIR; after the command 12 as served, 0 replaced, 0 removed, 3 written anew"); a
// directory the library did not use and built again (SnapshotUse::Ignored) is said always, as a
// warning naming the library and the snapshot.
void ReportCacheDirUse(const std::vector<ServedCacheDir>& served, bool report,
                       const cache_dirs::SnapshotLimits& limits = {});

// Captures each planned directory holding files, a line each on stderr. What cannot be stored
// is said; it never changes the command's exit code.
void CaptureCacheDirs(objects::ObjectCache& cache, const std::vector<PlannedDir>& planned,
                      const cache_dirs::SnapshotLimits& limits = {});

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_RUN_CACHE_DIRS_H_
