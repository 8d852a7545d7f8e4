// FileDigests: the content digest of a file (a compiler tool, a source, a header), memoized
// by its identity on disk (device, inode, size, mtime and ctime in nanoseconds) in a small
// table file, so a launcher that checks a thousand headers stats them and reads none when
// nothing changed. A file whose stat changed in any of those fields is read again; ctime
// cannot be set back by a user, so an edit always shows. A file that changed less than
// `settle` (1 s) before it was read is not memoized (ccache's "file too new" rule): a second
// edit within the file system's timestamp granularity (a jiffy; a second on some) could
// leave the same stat behind.
#ifndef KCACHE_ENGINE_OBJECTS_FILE_DIGESTS_H_
#define KCACHE_ENGINE_OBJECTS_FILE_DIGESTS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kcache::objects {

struct FileDigest {
  std::string sha256;           // 64 lowercase hex digits of the content
  bool has_time_macro = false;  // the content names __DATE__, __TIME__ or __TIMESTAMP__
  absl::Time changed;           // the later of its mtime and ctime
};

// Not thread-safe: one per launcher process.
class FileDigests {
 public:
  // `table_path`: where the memo lives ("" keeps it in memory only). A missing or damaged
  // table is an empty one.
  explicit FileDigests(std::string table_path, absl::Duration settle = absl::Seconds(1));

  // The digest of `path` (followed through symlinks). NotFound / FailedPrecondition when it
  // cannot be read.
  absl::StatusOr<FileDigest> Digest(const std::string& path);

  // Writes the table when it changed (to a temporary file renamed over it: concurrent
  // launchers never see half a table; the last writer wins). Errors are ignored: the memo
  // is only a shortcut.
  void Save();

 private:
  struct Entry {
    std::string stat_key;  // "dev ino size mtime_ns ctime_ns"
    FileDigest digest;
  };
  void Load();

  std::string table_path_;
  absl::Duration settle_;
  absl::flat_hash_map<std::string, Entry> entries_;  // by path
  bool dirty_ = false;
};

// SHA-256 of `data` in hex.
std::string Sha256Hex(const std::string& data);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_FILE_DIGESTS_H_
