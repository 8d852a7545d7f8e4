// FileDigests: the content digest of a file (a compiler tool, a source, a header), memoized
// by its identity on disk (device, inode, size, mtime and ctime in nanoseconds) in a small
// table file, so a launcher that checks a thousand headers stats them and reads none when
// nothing changed. A file whose stat changed in any of those fields is read again; ctime
// cannot be set back by a user, so an edit always shows. A file that changed less than
// `settle` (1 s) before it was read is not memoized (ccache's "file too new" rule): a second
// edit within the file system's timestamp granularity (a jiffy; a second on some) could
// leave the same stat behind.
#ifndef KCACHE_ENGINE_KEYS_FILE_DIGESTS_H_
#define KCACHE_ENGINE_KEYS_FILE_DIGESTS_H_

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kcache::objects {

// What of a file its digest covers.
enum class DigestKind : uint8_t {
  kContent = 0,  // its bytes
  // The file as a linker reads it: an ELF shared object (64-bit, little-endian) by its link
  // interface (elf_link_interface.h: its dynamic symbols, versions and dynamic section, not its
  // code), anything else (an object, an archive, a linker script) by its bytes. Written
  // kLinkInputPrefix + the hex digits, so a manifest says how each file was digested.
  kLinkInput = 1,
  // A program the compile runs (nvcc, cicc, cc1plus): its bytes, as kContent, without the
  // search for time macros that only a file the preprocessor reads needs (cicc and cc1plus
  // name __DATE__ three quarters of the way in: a new pod's first .cu scanned ~220 MB of
  // tools for nothing). Spelled as kContent, memoized apart from it; has_time_macro is false.
  kTool = 2,
};
inline constexpr absl::string_view kLinkInputPrefix = "link:";
// kTool's digest as a manifest spells it (key1 spells it as kContent's).
inline constexpr absl::string_view kToolPrefix = "tool:";

// Besides a digest, a manifest line may record another fact of its path, which a check finds
// true again or not (engine/keys/observed_manifest.h says which compiles record them):
inline constexpr absl::string_view kAbsentFact = "absent";         // ENOENT or ENOTDIR
inline constexpr absl::string_view kExistsPrefix = "exists:";      // stat's type: file dir other
inline constexpr absl::string_view kLexistsPrefix = "lexists:";    // lstat's: ... symlink
inline constexpr absl::string_view kFailedPrefix = "failed:";      // stat failed with this errno
inline constexpr absl::string_view kReadlinkPrefix = "readlink:";  // the link's target
inline constexpr absl::string_view kRealpathPrefix = "realpath:";  // realpath(3)'s answer
inline constexpr absl::string_view kListingPrefix = "listing:";    // + ListingDigest's
// Before a digest: the path also resolves to itself (realpath(path) == path, no symbolic link
// in it), as a preprocessor asks of every header. Checked with the file's own lstat and each
// directory prefix once per check, rather than as a realpath line of its own per header.
inline constexpr absl::string_view kResolvesToItselfMark = "~";
// The type a stat or lstat of `st` is spelled with after kExistsPrefix / kLexistsPrefix.
absl::string_view FileTypeName(const struct stat& st);

// XXH3-128 of a directory's entry names (sorted, without "." and ".."), or why not.
absl::StatusOr<std::string> ListingDigest(const std::string& dir);

// A digest's hex digits: XXH3-128 (core/xxh128.h), not SHA-256. The key a launcher looks up and
// the object it puts are both made on the client's side: a client that could make two headers
// collide could as well put any object under any key, which the trust rule already covers
// (docs/torch-extensions.md); against accidents 128 bits suffice. It is ~5x SHA-256's speed:
// a new pod's first compile of a torch extension digests ~60 MB of headers and ~30 MB of
// cc1plus, a .cu ~230 MB of nvcc's tools, and SHA-256 was 40% of it.
inline constexpr size_t kDigestHexDigits = 32;

struct FileDigest {
  // kDigestHexDigits lowercase hex digits: the content's XXH3-128; for a file of 64 MiB or
  // more, XXH3-128 over its size and each 16 MiB chunk's XXH3-128, the chunks hashed on several
  // threads. DigestKind::kLinkInput's: kLinkInputPrefix and the hex digits.
  std::string hex;
  bool has_time_macro = false;  // the content names __DATE__, __TIME__ or __TIMESTAMP__
  absl::Time changed;           // the later of its mtime and ctime
};

// Not thread-safe: one per launcher process. A file is stat'ed through a descriptor of its
// directory, opened once per directory and pass (a thousand headers in a few dozen
// directories: the kernel walks each directory's path once, not once per header); at most
// kMaxDirectories are kept open, the rest stat'ed by path. A pass (BeginPass) is one check or
// record of a manifest: a directory replaced after it began may be seen as it was when the
// pass opened it, never across passes, so a manifest recorded after a compile never names
// files through a directory opened before it.
class FileDigests {
 public:
  static constexpr size_t kMaxDirectories = 512;

  // `table_path`: where the memo lives ("" keeps it in memory only). A missing or damaged
  // table is an empty one; a damaged line is skipped.
  explicit FileDigests(std::string table_path, absl::Duration settle = absl::Seconds(1));
  ~FileDigests();
  FileDigests(const FileDigests&) = delete;
  FileDigests& operator=(const FileDigests&) = delete;

  // The digest of `path` (followed through symlinks). NotFound / FailedPrecondition when it
  // cannot be read. Each kind is memoized on its own.
  absl::StatusOr<FileDigest> Digest(const std::string& path,
                                    DigestKind kind = DigestKind::kContent);

  // Digest(path, kind) of each of `paths`, the files the memo does not vouch for read and
  // hashed on up to kMaxCheckThreads threads at once (nvcc's tools are ~200 MB: a new pod's
  // first .cu digests them all).
  std::vector<absl::StatusOr<FileDigest>> DigestAll(const std::vector<std::string>& paths,
                                                    DigestKind kind = DigestKind::kContent);

  // A file and the digest it was recorded with (a manifest's entry, its path resolved); its
  // kind is the one the digest's spelling says. Or one of the facts above (kAbsentFact, ...),
  // a readlink target or realpath answer with its base directories restored.
  struct Expected {
    std::string path;
    absl::string_view digest;  // FileDigest::hex, or a fact
  };
  // The index of the first of `files` whose digest is not the expected one now, or that
  // cannot be read; files.size() when all match. Checked on up to kMaxCheckThreads threads
  // when there are kParallelFrom files or more (a torch extension's compile checks ~5 400
  // headers: their stat calls were a third of a hit): each thread stats and compares its
  // share, reading and hashing the files the memo does not know (a new pod's first compile
  // hashes them all); what was read is memoized after. A file past a difference found
  // earlier may be left unchecked.
  size_t FirstMismatch(const std::vector<Expected>& files);
  static constexpr size_t kParallelFrom = 256;
  static constexpr size_t kMaxCheckThreads = 4;

  // Closes the directory descriptors: later lookups open their directories again by path.
  void BeginPass();

  // Writes the table when it changed (to a temporary file renamed over it: concurrent
  // launchers never see half a table; the last writer wins). Errors are ignored: the memo
  // is only a shortcut.
  void Save();

 private:
  // What identifies a file's content on disk: device, inode, size, mtime and ctime (ns).
  struct StatKey {
    uint64_t values[5] = {};
    bool operator==(const StatKey& other) const;
  };
  struct Entry {
    StatKey stat;
    FileDigest digest;
  };
  // What the memo holds for a path: learned in this process, else the loaded table's line
  // (parsed now: a table is loaded as views of its lines, not made into entries, since a
  // command looks up only the files it names). Views into entries_ or table_.
  struct Known {
    StatKey stat;
    absl::string_view hex;
    bool has_time_macro = false;
  };
  std::optional<Known> Find(absl::string_view path) const;
  void Load();
  // Memoizes `digest` of `path` (whose stat was `st`, read at `read_at`) unless it changed
  // less than settle_ before it was read.
  void Remember(const std::string& path, const struct stat& st, const FileDigest& digest,
                absl::Time read_at);
  // The descriptor to resolve `path` against and the offset of the name to resolve there:
  // its directory's (opened once per pass) and its last component, or AT_FDCWD and the whole
  // path.
  std::pair<int, size_t> Directory(const std::string& path);
  // Whether `known` (the memo's entry for a file, if any) still stands for the file at `name`
  // under `dir` (Directory's): a regular file, stat'ed now (*st, following symlinks), whose
  // stat is the one recorded.
  static bool Vouches(const std::optional<Known>& known, int dir, const char* name,
                      struct stat* st);
  // FirstMismatch's steps: a plan per file, made serially (PlanChecks), then each file checked,
  // on any thread (Matches: whether it matches now; a file read and hashed is left in *read, to
  // memoize after).
  struct Check;
  struct CheckPlan;
  struct Read;
  void PlanChecks(const std::vector<Expected>& files, CheckPlan* plan);
  static bool Matches(const Expected& file, const Check& check, Read* read);
  static StatKey KeyOf(const struct stat& st);

  std::string table_path_;
  absl::Duration settle_;
  std::string table_;  // the table file as loaded
  // path -> its line's fields before the path ("hex \t macro \t dev ino size mtime ctime"),
  // views into table_.
  absl::flat_hash_map<absl::string_view, absl::string_view> loaded_;
  absl::flat_hash_map<std::string, Entry> entries_;    // learned here, by path; over loaded_
  absl::flat_hash_map<std::string, int> directories_;  // path -> O_PATH descriptor (or -1)
  bool dirty_ = false;
};

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_FILE_DIGESTS_H_
