// What a snapshot of a cache directory takes: its regular files, each with its path under the
// directory, size, modification time (ninja and numba rebuild on a changed one) and SHA-256,
// read within bounds. What it leaves out is said, never silently dropped: the table's
// leave_out files, links (a link could name any host file), devices, FIFOs and sockets, files
// over the bound, and everything past the count or byte bound.
#ifndef KCACHE_ENGINE_CACHE_DIRS_SNAPSHOT_FILES_H_
#define KCACHE_ENGINE_CACHE_DIRS_SNAPSHOT_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/cache_dirs/cache_dir_table.h"

namespace kcache::cache_dirs {

struct SnapshotLimits {
  uint64_t max_files = 100000;
  uint64_t max_file_bytes = 2ull << 30;  // one file
  uint64_t max_total_bytes = 8ull << 30;
  int max_depth = 64;  // folders below the directory; deeper ones are skipped, said so
};

struct SnapshotFile {
  std::string path;  // relative, '/'-separated, no "." or ".." part
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool executable = false;  // the owner's execute bit: served files get 0755, others 0644
  std::string sha256;       // 64 hex digits
  // With a sink: the ids it gave the file's chunks, in order (ListSnapshotFiles).
  std::vector<std::string> chunks;
};

// A file's bytes are handed on in chunks of this size (the last one shorter), so that a capture
// holds one chunk of a file in memory, never the file, and the same bytes make the same chunk.
inline constexpr uint64_t kSnapshotChunkBytes = uint64_t{8} << 20;

// Takes each chunk of each file a listing takes (snapshot_store.h stores them) and says the id
// it is kept under; an error leaves the file out of the listing, with the error as the reason.
class SnapshotSink {
 public:
  virtual ~SnapshotSink() = default;
  virtual absl::StatusOr<std::string> Chunk(absl::string_view bytes) = 0;
};

struct SnapshotListing {
  std::vector<SnapshotFile> files;  // in path order
  // Relative path and why, for each thing not taken ("a link", "2.1 GiB: over the 2 GiB
  // bound", "left out by the table", "past the 100000 files bound").
  std::vector<std::pair<std::string, std::string>> skipped;
  uint64_t bytes = 0;
};

// The files of `spec`'s directory `dir` (absolute), read without following a link anywhere
// (O_NOFOLLOW, each directory opened relative to its parent's descriptor), so that nothing
// outside `dir` is read whatever links the directory holds or gains while it is read. With a
// `sink`, each file's bytes go to it as they are read (each file is read once). NotFound when
// `dir` is absent; FailedPrecondition when it is a link or not a directory.
absl::StatusOr<SnapshotListing> ListSnapshotFiles(const CacheDirSpec& spec, const std::string& dir,
                                                  const SnapshotLimits& limits = {},
                                                  SnapshotSink* sink = nullptr);

// The files ListSnapshotFiles would take, by their stat alone (path, size, mtime, mode; no
// sha256, nothing opened or read): what a served directory holds after its command, to compare
// with what was served (CompareWithServed, snapshot_store.h).
absl::StatusOr<SnapshotListing> StatSnapshotFiles(const CacheDirSpec& spec, const std::string& dir,
                                                  const SnapshotLimits& limits = {});

}  // namespace kcache::cache_dirs

#endif  // KCACHE_ENGINE_CACHE_DIRS_SNAPSHOT_FILES_H_
