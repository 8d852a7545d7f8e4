// Snapshots of cache directories kept in an object cache (engine/objects/object_cache.h): a
// store directory for `kcache run --store`, kcached (its baked and writable stores and the Redis
// Cluster tier) for `kcache run --server` (docs/cache-dirs.md).
//
// A snapshot is two kinds of entry, each in a key domain of its own (never a compile's key1 nor
// a Redis-door name's):
// - a chunk of a file (snapshot_files.h's kSnapshotChunkBytes at most), content-addressed: its
//   id is the SHA-256 of its bytes, so one copy serves every snapshot and file holding it, and a
//   chunk is served only when its bytes still hash to its id;
// - the manifest, under the directory's key (cache_dir_key.h): the key's components, and per
//   file its relative path, size, mtime, mode, SHA-256 and chunk ids. A manifest is checked
//   before anything is written: its components must hash to the key asked for, and its paths
//   must be relative, without "." or ".." or empty parts, each once, within the serve's bounds.
// A baked store's snapshot is never replaced: a capture of the same key then keeps it.
#ifndef KCACHE_ENGINE_CACHE_DIRS_SNAPSHOT_STORE_H_
#define KCACHE_ENGINE_CACHE_DIRS_SNAPSHOT_STORE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/object_entry.h"
#include "engine/cache_dirs/cache_dir_key.h"
#include "engine/cache_dirs/cache_dir_table.h"
#include "engine/cache_dirs/snapshot_files.h"
#include "engine/objects/object_cache.h"

namespace kcache::cache_dirs {

// Whether `status` says the cache did not answer (Unavailable, DeadlineExceeded: kcached away or
// hung), so that a call now would wait its timeout again: capture and serve stop at the first.
bool CacheUnanswered(const absl::Status& status);

// What a snapshot's manifest says.
struct SnapshotManifest {
  std::string library;                                          // the row's name
  std::vector<std::pair<std::string, std::string>> components;  // CacheDirKey's
  std::vector<SnapshotFile> files;                              // with their chunks
};

// The entry keys: of a snapshot's manifest under a directory key (64 hex digits), and of a
// chunk under its SHA-256 (64 hex digits).
ObjectEntryKey SnapshotManifestKey(absl::string_view key_digest);
ObjectEntryKey SnapshotChunkKey(absl::string_view chunk_sha256);

std::string EncodeSnapshotManifest(const SnapshotManifest& manifest);
// DataLoss when the bytes are not a manifest; InvalidArgument naming the file for a path that is
// not a plain relative one ("..", ".", empty parts, absolute), a path twice, a file that is also
// a folder of another, or a chunk id that is not 64 hex digits; ResourceExhausted when it is
// past `limits` (files, one file's bytes, all bytes, depth).
absl::StatusOr<SnapshotManifest> DecodeSnapshotManifest(absl::string_view bytes,
                                                        const SnapshotLimits& limits = {});

// What a capture did.
struct CaptureReport {
  uint64_t files = 0, bytes = 0;
  uint64_t chunks_stored = 0;   // put now
  uint64_t chunks_present = 0;  // already in the cache (another snapshot's, an earlier capture's)
  bool kept_baked = false;      // a baked store holds this key's snapshot: kept, not replaced
  bool unchanged = false;       // the cache holds this very manifest already: not put again
  std::vector<std::pair<std::string, std::string>> skipped;  // ListSnapshotFiles's
};

// Stores the snapshot of `spec`'s directory `dir` under `key` in `cache`: the chunks it lacks,
// then the manifest (so a manifest never names a chunk not stored). NotFound when `dir` is
// absent; FailedPrecondition when it holds no file to take; the cache's error when the manifest
// cannot be stored, or at once when the cache stops answering (Unavailable, DeadlineExceeded:
// no manifest is put). `put_by` as ObjectEntry's.
absl::StatusOr<CaptureReport> CaptureSnapshot(objects::ObjectCache& cache, const CacheDirSpec& spec,
                                              const std::string& dir, const CacheDirKey& key,
                                              const SnapshotLimits& limits = {},
                                              const std::string& put_by = "");

// Whether `cache` lists a snapshot under `key` (the listing only: a cheap first question, asked
// with a tight deadline before the transfers). The cache's error when the listing fails.
absl::StatusOr<bool> HoldsSnapshot(objects::ObjectCache& cache, const CacheDirKey& key);

// What serving a snapshot did.
struct ServeReport {
  uint64_t files_written = 0, bytes_written = 0;
  // Files the directory already had: left as they are, the process's own (same size and mtime:
  // counted as served too).
  uint64_t files_present = 0, files_present_same = 0;
  std::vector<std::pair<std::string, std::string>> refused;  // path and why, for files not written
  // The files the directory holds as the snapshot has them (written, or found with its size and
  // mtime): path, size and mtime, for CompareWithServed once the command has run.
  std::vector<SnapshotFile> served;
};

// Fills `spec`'s directory `dir` (absolute; made when absent) from the snapshot under `key`:
// every file with its bytes, mode and mtime, each written to a temporary in its folder and
// renamed in without replacing a file already there; folders are opened relative to their
// parent without following links, so nothing is written outside `dir`. A chunk whose bytes do
// not hash to its id, or a file whose bytes do not hash to its SHA-256, is refused and not
// written. NotFound when no snapshot has this key; DataLoss, InvalidArgument or
// ResourceExhausted (DecodeSnapshotManifest's) for a manifest that does not check, before
// anything is written; FailedPrecondition when `dir` cannot be made or is a link; Unavailable or
// DeadlineExceeded (the cache's) once the cache stops answering: the files written until then
// stay, each whole and checked.
absl::StatusOr<ServeReport> ServeSnapshot(objects::ObjectCache& cache, const std::string& dir,
                                          const CacheDirKey& key,
                                          const SnapshotLimits& limits = {});

// What became of a served directory while its command ran: `served` (ServeReport::served)
// against `now` (StatSnapshotFiles after the command), by size and mtime. Whether the library
// opened a file is not seen (its mtime stays; access times are not kept on most nodes).
struct SnapshotUse {
  uint64_t served = 0;
  uint64_t as_served = 0;     // still there with the size and mtime served
  uint64_t replaced = 0;      // there, with another size or mtime: written again
  uint64_t removed = 0;       // gone
  uint64_t written_anew = 0;  // files the snapshot did not have
  // The library did not use what was served and built it again: files were served, and the
  // command replaced or removed at least half of them, or it kept none as served and wrote
  // files anew. Its own key then holds something kcache's does not (or the snapshot is stale).
  bool Ignored() const;
};
SnapshotUse CompareWithServed(const std::vector<SnapshotFile>& served, const SnapshotListing& now);

}  // namespace kcache::cache_dirs

#endif  // KCACHE_ENGINE_CACHE_DIRS_SNAPSHOT_STORE_H_
