#include "engine/cache_dirs/snapshot_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/coding.h"
#include "core/sha256.h"
#include "engine/objects/object_bundle.h"

namespace kcache::cache_dirs {
namespace {

constexpr absl::string_view kManifestMagic = "kcache.cache-dir-snapshot.v1";

ObjectEntryKey DomainKey(absl::string_view domain, absl::string_view id) {
  std::string framing = absl::StrCat(domain, absl::string_view("\0", 1), id);
  return ObjectEntryKey::Of(CommandKey(Sha256Of(framing)), HeaderManifest{});
}

bool IsSha256Hex(absl::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

// A bundle holding `bytes` with `name` as its one target, as named values are kept
// (engine/objects/named_object.h): a read checks the name.
std::string Wrap(absl::string_view name, std::string bytes) {
  objects::ObjectBundle bundle;
  bundle.object = std::move(bytes);
  bundle.deps.targets.emplace_back(name);
  return objects::EncodeBundle(bundle);
}

absl::StatusOr<std::string> GetWrapped(objects::ObjectCache& cache, const ObjectEntryKey& key,
                                       absl::string_view name) {
  absl::StatusOr<std::string> bytes = cache.Get(key);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<objects::ObjectBundle> bundle = objects::DecodeBundle(*bytes);
  if (!bundle.ok() || bundle->deps.targets.size() != 1 || bundle->deps.targets[0] != name) {
    return absl::DataLossError(absl::StrCat("the entry of ", name, " holds something else"));
  }
  return std::move(bundle->object);
}

std::string ChunkName(absl::string_view id) { return absl::StrCat("cache-dir chunk ", id); }
std::string ManifestName(absl::string_view digest) {
  return absl::StrCat("cache-dir snapshot ", digest);
}

// Stores each chunk it is handed, unless the cache already holds it.
class StoringSink : public SnapshotSink {
 public:
  StoringSink(objects::ObjectCache& cache, const std::string& put_by, CaptureReport& report)
      : cache_(cache), put_by_(put_by), report_(report) {}

  absl::StatusOr<std::string> Chunk(absl::string_view bytes) override {
    if (!unanswered_.ok()) return unanswered_;  // each call would wait its timeout again
    std::string id = Sha256Hex(bytes);
    ObjectEntryKey key = SnapshotChunkKey(id);
    std::string name = ChunkName(id);
    // One already there is taken only when its bytes are these: an entry a damaged store or a
    // hostile writer left under this id is replaced, not kept.
    absl::StatusOr<std::vector<ObjectEntry>> listed = cache_.List(key.command);
    if (CacheUnanswered(listed.status())) {
      unanswered_ = listed.status();
      return unanswered_;
    }
    if (listed.ok() && !listed->empty()) {
      absl::StatusOr<std::string> held = GetWrapped(cache_, key, name);
      if (held.ok() && *held == bytes) {
        ++report_.chunks_present;
        return id;
      }
    }
    std::string wrapped = Wrap(name, std::string(bytes));
    ObjectEntry entry;
    entry.key = key;
    entry.source = name;
    entry.fields.emplace_back("cache-dir chunk", id);
    entry.size = wrapped.size();
    entry.put_by = put_by_;
    absl::Status put = cache_.Put(entry, std::move(wrapped));
    if (absl::IsAlreadyExists(put)) {  // a baked store's: the same bytes, by their id
      ++report_.chunks_present;
      return id;
    }
    if (CacheUnanswered(put)) unanswered_ = put;
    if (!put.ok()) return put;
    ++report_.chunks_stored;
    return id;
  }

  const absl::Status& unanswered() const { return unanswered_; }

 private:
  objects::ObjectCache& cache_;
  const std::string& put_by_;
  CaptureReport& report_;
  absl::Status unanswered_;
};

// "" when `path` is a plain relative path within `max_depth` folders, else why not.
std::string PathProblem(absl::string_view path, int max_depth) {
  if (path.empty()) return "an empty path";
  if (path.find('\0') != absl::string_view::npos) return "a NUL in the path";
  if (path.front() == '/') return "an absolute path";
  int parts = 0;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return "a \".\", \"..\" or empty part in the path";
    }
    ++parts;
  }
  if (parts - 1 > max_depth) return absl::StrCat("deeper than ", max_depth, " folders");
  return "";
}

absl::Status CheckFiles(const std::vector<SnapshotFile>& files, const SnapshotLimits& limits) {
  if (files.size() > limits.max_files) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the snapshot holds ", files.size(), " files, past the bound of ", limits.max_files));
  }
  std::set<std::string> paths, folders;
  uint64_t total = 0;
  for (const SnapshotFile& file : files) {
    if (std::string problem = PathProblem(file.path, limits.max_depth); !problem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the snapshot's file \"", absl::CHexEscape(file.path), "\": ", problem));
    }
    if (!paths.insert(file.path).second) {
      return absl::InvalidArgumentError(absl::StrCat("the snapshot names ", file.path, " twice"));
    }
    for (size_t slash = file.path.find('/'); slash != std::string::npos;
         slash = file.path.find('/', slash + 1)) {
      folders.insert(file.path.substr(0, slash));
    }
    if (file.size > limits.max_file_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("the snapshot's file ", file.path, " has ",
                                                       file.size, " bytes, past the bound of ",
                                                       limits.max_file_bytes));
    }
    total += file.size;
    if (total > limits.max_total_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the snapshot's files hold more than the bound of ", limits.max_total_bytes, " bytes"));
    }
    if (!IsSha256Hex(file.sha256)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the snapshot's file ", file.path, " has no SHA-256 of 64 hex digits"));
    }
    uint64_t chunks = (file.size + kSnapshotChunkBytes - 1) / kSnapshotChunkBytes;
    if (file.chunks.size() != chunks) {
      return absl::InvalidArgumentError(absl::StrCat("the snapshot's file ", file.path, " of ",
                                                     file.size, " bytes names ", file.chunks.size(),
                                                     " chunks, not ", chunks));
    }
    for (const std::string& chunk : file.chunks) {
      if (!IsSha256Hex(chunk)) {
        return absl::InvalidArgumentError(absl::StrCat("the snapshot's file ", file.path,
                                                       " names a chunk id that is not "
                                                       "64 hex digits"));
      }
    }
  }
  for (const std::string& folder : folders) {
    if (paths.count(folder) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the snapshot's ", folder, " is both a file and a folder"));
    }
  }
  return absl::OkStatus();
}

// Opens (making it when absent) the folder of `path` under the directory open at `root`, never
// following a link; -1 with errno set otherwise. The leaf's name goes to `leaf`.
int OpenFolderOf(int root, const std::string& path, std::string* leaf) {
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  *leaf = parts.back();
  parts.pop_back();
  int fd = dup(root);
  for (const std::string& part : parts) {
    if (fd < 0) return -1;
    int next = openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && mkdirat(fd, part.c_str(), 0755) == 0) {
      next = openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    int saved = errno;
    close(fd);
    errno = saved;
    fd = next;
  }
  return fd;
}

bool WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Writes `file` from its chunks into a temporary in `folder` and renames it to `leaf`; "" when
// written, "present" when a file of that name appeared meanwhile, else why not.
// `unanswered` is set when the cache did not answer (Unavailable, DeadlineExceeded).
std::string WriteFile(objects::ObjectCache& cache, int folder, const std::string& leaf,
                      const SnapshotFile& file, absl::Status& unanswered) {
  static std::atomic<uint64_t> counter{0};
  std::string temporary = absl::StrCat(".kcache-serve-", getpid(), "-", counter++, ".tmp");
  int fd =
      openat(folder, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::StrCat("cannot be written: ", strerror(errno));
  std::string why;
  Sha256 sha;
  uint64_t written = 0;
  for (const std::string& id : file.chunks) {
    absl::StatusOr<std::string> chunk = GetWrapped(cache, SnapshotChunkKey(id), ChunkName(id));
    if (!chunk.ok()) {
      if (CacheUnanswered(chunk.status())) {
        unanswered = chunk.status();
      }
      why = absl::StrCat("its chunk ", id.substr(0, 12),
                         " is not served: ", chunk.status().message());
      break;
    }
    if (Sha256Hex(*chunk) != id) {
      why = absl::StrCat("its chunk ", id.substr(0, 12), " does not hash to its id (damaged)");
      break;
    }
    sha.Update(*chunk);
    written += chunk->size();
    if (!WriteAll(fd, *chunk)) {
      why = absl::StrCat("cannot be written: ", strerror(errno));
      break;
    }
  }
  if (why.empty() && (written != file.size || DigestHex(sha.Finish()) != file.sha256)) {
    why = "its bytes do not hash to the snapshot's SHA-256 (damaged)";
  }
  if (why.empty()) {
    struct timespec times[2];
    times[0].tv_sec = 0;
    times[0].tv_nsec = UTIME_NOW;
    times[1].tv_sec = file.mtime_ns / 1000000000;
    times[1].tv_nsec = file.mtime_ns % 1000000000;
    if (fchmod(fd, file.executable ? 0755 : 0644) != 0 || futimens(fd, times) != 0) {
      why = absl::StrCat("cannot set its mode and mtime: ", strerror(errno));
    }
  }
  if (close(fd) != 0 && why.empty()) why = absl::StrCat("cannot be written: ", strerror(errno));
  if (why.empty() &&
      renameat2(folder, temporary.c_str(), folder, leaf.c_str(), RENAME_NOREPLACE) != 0) {
    why = errno == EEXIST ? "present" : absl::StrCat("cannot be renamed in: ", strerror(errno));
  }
  if (!why.empty()) unlinkat(folder, temporary.c_str(), 0);
  return why;
}

}  // namespace

bool CacheUnanswered(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

ObjectEntryKey SnapshotManifestKey(absl::string_view key_digest) {
  return DomainKey("kcache.cache-dir-snapshot", key_digest);
}

ObjectEntryKey SnapshotChunkKey(absl::string_view chunk_sha256) {
  return DomainKey("kcache.cache-dir-chunk", chunk_sha256);
}

std::string EncodeSnapshotManifest(const SnapshotManifest& manifest) {
  std::string out;
  objects::PutFramed(out, kManifestMagic);
  objects::PutFramed(out, manifest.library);
  PutFixed32(out, static_cast<uint32_t>(manifest.components.size()));
  for (const auto& [name, value] : manifest.components) {
    objects::PutFramed(out, name);
    objects::PutFramed(out, value);
  }
  PutFixed32(out, static_cast<uint32_t>(manifest.files.size()));
  for (const SnapshotFile& file : manifest.files) {
    objects::PutFramed(out, file.path);
    PutFixed64(out, file.size);
    PutFixed64(out, static_cast<uint64_t>(file.mtime_ns));
    out.push_back(file.executable ? 1 : 0);
    objects::PutFramed(out, file.sha256);
    PutFixed32(out, static_cast<uint32_t>(file.chunks.size()));
    for (const std::string& chunk : file.chunks) objects::PutFramed(out, chunk);
  }
  return out;
}

absl::StatusOr<SnapshotManifest> DecodeSnapshotManifest(absl::string_view in,
                                                        const SnapshotLimits& limits) {
  auto cut = [] { return absl::DataLossError("the snapshot's manifest is cut short or damaged"); };
  absl::string_view magic, text;
  if (!objects::TakeFramed(in, &magic) || magic != kManifestMagic) {
    return absl::DataLossError("not a kcache cache-directory snapshot manifest");
  }
  SnapshotManifest manifest;
  uint32_t count = 0;
  if (!objects::TakeFramed(in, &text) || !GetFixed32(in, &count)) return cut();
  manifest.library = std::string(text);
  for (uint32_t i = 0; i < count; ++i) {
    absl::string_view name, value;
    if (!objects::TakeFramed(in, &name) || !objects::TakeFramed(in, &value)) return cut();
    manifest.components.emplace_back(name, value);
  }
  if (!GetFixed32(in, &count)) return cut();
  if (count > limits.max_files) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the snapshot holds ", count, " files, past the bound of ", limits.max_files));
  }
  for (uint32_t i = 0; i < count; ++i) {
    SnapshotFile file;
    uint64_t mtime = 0;
    uint32_t chunks = 0;
    if (!objects::TakeFramed(in, &text)) return cut();
    file.path = std::string(text);
    if (!GetFixed64(in, &file.size) || !GetFixed64(in, &mtime) || in.empty()) return cut();
    file.mtime_ns = static_cast<int64_t>(mtime);
    file.executable = in.front() != 0;
    in.remove_prefix(1);
    if (!objects::TakeFramed(in, &text) || !GetFixed32(in, &chunks)) return cut();
    file.sha256 = std::string(text);
    if (chunks > in.size()) return cut();  // each takes at least its length's bytes
    for (uint32_t c = 0; c < chunks; ++c) {
      if (!objects::TakeFramed(in, &text)) return cut();
      file.chunks.emplace_back(text);
    }
    manifest.files.push_back(std::move(file));
  }
  if (!in.empty()) return cut();
  if (absl::Status checked = CheckFiles(manifest.files, limits); !checked.ok()) return checked;
  return manifest;
}

absl::StatusOr<CaptureReport> CaptureSnapshot(objects::ObjectCache& cache, const CacheDirSpec& spec,
                                              const std::string& dir, const CacheDirKey& key,
                                              const SnapshotLimits& limits,
                                              const std::string& put_by) {
  CaptureReport report;
  StoringSink sink(cache, put_by, report);
  absl::StatusOr<SnapshotListing> listing = ListSnapshotFiles(spec, dir, limits, &sink);
  if (!listing.ok()) return listing.status();
  if (!sink.unanswered().ok()) return sink.unanswered();
  report.skipped = listing->skipped;
  if (listing->files.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec.name, "'s cache directory ", dir, " holds no file to take"));
  }
  report.files = listing->files.size();
  report.bytes = listing->bytes;
  SnapshotManifest manifest{spec.name, key.components, std::move(listing->files)};
  std::string name = ManifestName(key.digest);
  std::string encoded = EncodeSnapshotManifest(manifest);
  if (absl::StatusOr<std::string> held = GetWrapped(cache, SnapshotManifestKey(key.digest), name);
      held.ok() && *held == encoded) {
    report.unchanged = true;  // the same files, times and modes: nothing to put
    return report;
  }
  std::string wrapped = Wrap(name, std::move(encoded));
  ObjectEntry entry;
  entry.key = SnapshotManifestKey(key.digest);
  entry.source = absl::StrCat("cache-dir ", spec.name, " ", dir);
  entry.fields = key.components;
  entry.size = wrapped.size();
  entry.put_by = put_by;
  absl::Status put = cache.Put(entry, std::move(wrapped));
  if (absl::IsAlreadyExists(put)) {
    report.kept_baked = true;
  } else if (!put.ok()) {
    return put;
  }
  return report;
}

absl::StatusOr<bool> HoldsSnapshot(objects::ObjectCache& cache, const CacheDirKey& key) {
  absl::StatusOr<std::vector<ObjectEntry>> listed =
      cache.List(SnapshotManifestKey(key.digest).command);
  if (!listed.ok()) return listed.status();
  return !listed->empty();
}

absl::StatusOr<ServeReport> ServeSnapshot(objects::ObjectCache& cache, const std::string& dir,
                                          const CacheDirKey& key, const SnapshotLimits& limits) {
  absl::StatusOr<std::string> bytes =
      GetWrapped(cache, SnapshotManifestKey(key.digest), ManifestName(key.digest));
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<SnapshotManifest> manifest = DecodeSnapshotManifest(*bytes, limits);
  if (!manifest.ok()) return manifest.status();
  if (CacheDirKeyDigest(manifest->components) != key.digest) {
    return absl::DataLossError(
        "the snapshot's manifest names another key than the one it is stored under");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  int root = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the cache directory ", dir, " cannot be made or opened as a directory (",
        errno == ELOOP || errno == ENOTDIR ? "a link or not a directory" : strerror(errno), ")"));
  }
  ServeReport report;
  absl::Status unanswered;
  for (const SnapshotFile& file : manifest->files) {
    if (!unanswered.ok()) break;
    std::string leaf;
    int folder = OpenFolderOf(root, file.path, &leaf);
    if (folder < 0) {
      report.refused.emplace_back(
          file.path,
          absl::StrCat("its folder cannot be made or is a link (", strerror(errno), ")"));
      continue;
    }
    struct stat st;
    std::string why = "present";
    if (fstatat(folder, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      why = WriteFile(cache, folder, leaf, file, unanswered);
    }
    bool as_served = why.empty();
    if (why.empty()) {
      ++report.files_written;
      report.bytes_written += file.size;
    } else if (why == "present") {
      ++report.files_present;
      if (fstatat(folder, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
          static_cast<uint64_t>(st.st_size) == file.size &&
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec ==
              file.mtime_ns) {
        ++report.files_present_same;
        as_served = true;
      }
    } else {
      report.refused.emplace_back(file.path, std::move(why));
    }
    close(folder);
    if (as_served) {
      report.served.push_back(
          SnapshotFile{file.path, file.size, file.mtime_ns, file.executable, file.sha256, {}});
    }
  }
  close(root);
  if (!unanswered.ok()) {
    return absl::Status(unanswered.code(), absl::StrCat("after ", report.files_written,
                                                        " files written: ", unanswered.message()));
  }
  return report;
}

bool SnapshotUse::Ignored() const {
  if (served == 0) return false;
  return (replaced + removed) * 2 >= served || (as_served == 0 && written_anew > 0);
}

SnapshotUse CompareWithServed(const std::vector<SnapshotFile>& served, const SnapshotListing& now) {
  absl::flat_hash_map<absl::string_view, const SnapshotFile*> present;
  for (const SnapshotFile& file : now.files) present.emplace(file.path, &file);
  SnapshotUse use;
  use.served = served.size();
  absl::flat_hash_set<absl::string_view> served_paths;
  for (const SnapshotFile& file : served) {
    served_paths.insert(file.path);
    auto it = present.find(file.path);
    if (it == present.end()) {
      ++use.removed;
    } else if (it->second->size == file.size && it->second->mtime_ns == file.mtime_ns) {
      ++use.as_served;
    } else {
      ++use.replaced;
    }
  }
  for (const SnapshotFile& file : now.files) {
    if (!served_paths.contains(file.path)) ++use.written_anew;
  }
  return use;
}

}  // namespace kcache::cache_dirs
