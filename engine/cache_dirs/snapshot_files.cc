#include "engine/cache_dirs/snapshot_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/sha256.h"

namespace kcache::cache_dirs {
namespace {

std::string Bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrCat(bytes >> 30, " GiB");
  if (bytes >= (1ull << 20)) return absl::StrCat(bytes >> 20, " MiB");
  return absl::StrCat(bytes, " B");
}

class Walker {
 public:
  // `stat_only`: files are listed by their stat, never opened or hashed (StatSnapshotFiles).
  Walker(const CacheDirSpec& spec, const SnapshotLimits& limits, SnapshotSink* sink,
         bool stat_only = false)
      : spec_(spec), limits_(limits), sink_(sink), stat_only_(stat_only) {}

  // Reads the directory open at `fd` (taken: closed here), whose path is `prefix`.
  void Directory(int fd, const std::string& prefix, int depth = 0) {
    if (depth > limits_.max_depth) {
      close(fd);
      Skip(prefix, absl::StrCat("deeper than ", limits_.max_depth, " folders"));
      return;
    }
    DIR* dir = fdopendir(fd);
    if (dir == nullptr) {
      close(fd);
      Skip(prefix, absl::StrCat("cannot be read: ", strerror(errno)));
      return;
    }
    std::vector<std::string> names;
    while (dirent* entry = readdir(dir)) {
      if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
        names.emplace_back(entry->d_name);
      }
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      Entry(dirfd(dir), prefix.empty() ? name : prefix + "/" + name, name, depth);
    }
    closedir(dir);
  }

  SnapshotListing Take() { return std::move(listing_); }

 private:
  static SnapshotFile FileOf(const std::string& path, const struct stat& st) {
    SnapshotFile file;
    file.path = path;
    file.size = static_cast<uint64_t>(st.st_size);
    file.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    file.executable = (st.st_mode & S_IXUSR) != 0;
    return file;
  }

  void Skip(const std::string& path, std::string why) {
    listing_.skipped.emplace_back(path, std::move(why));
  }

  void Entry(int parent, const std::string& path, const std::string& name, int depth) {
    struct stat st;
    if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      Skip(path, absl::StrCat("cannot be read: ", strerror(errno)));
      return;
    }
    if (S_ISLNK(st.st_mode)) return Skip(path, "a link: not followed");
    if (S_ISDIR(st.st_mode)) {
      int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return Skip(path, absl::StrCat("cannot be opened: ", strerror(errno)));
      Directory(fd, path, depth + 1);
      return;
    }
    if (!S_ISREG(st.st_mode)) return Skip(path, "not a regular file (a device, FIFO or socket)");
    if (LeftOut(spec_, path)) return Skip(path, "left out by the table");
    uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size > limits_.max_file_bytes) {
      return Skip(path, absl::StrCat(Bytes(size), ": over the ", Bytes(limits_.max_file_bytes),
                                     " bound of one file"));
    }
    if (listing_.files.size() >= limits_.max_files) {
      return Skip(path, absl::StrCat("past the ", limits_.max_files, " files bound"));
    }
    if (listing_.bytes + size > limits_.max_total_bytes) {
      return Skip(path, absl::StrCat("past the ", Bytes(limits_.max_total_bytes), " bound"));
    }
    if (stat_only_) {
      listing_.bytes += size;
      listing_.files.push_back(FileOf(path, st));
      return;
    }
    int fd = openat(parent, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return Skip(path, absl::StrCat("cannot be opened: ", strerror(errno)));
    struct stat opened;
    if (fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_ino != st.st_ino) {
      close(fd);
      return Skip(path, "replaced while it was read");
    }
    SnapshotFile file = FileOf(path, st);
    std::string why = Read(fd, size, file);
    close(fd);
    if (!why.empty()) return Skip(path, std::move(why));
    listing_.bytes += size;
    listing_.files.push_back(std::move(file));
  }

  // Hashes the `size` bytes open at `fd` into `file` and hands them to the sink, if any, a
  // chunk at a time; "" when done, else why the file is not taken.
  std::string Read(int fd, uint64_t size, SnapshotFile& file) {
    Sha256 sha;
    uint64_t read_bytes = 0;
    std::string chunk;
    auto hand_on = [&]() -> std::string {
      if (sink_ == nullptr || chunk.empty()) return "";
      absl::StatusOr<std::string> id = sink_->Chunk(chunk);
      if (!id.ok()) return absl::StrCat("not stored: ", id.status().message());
      file.chunks.push_back(*std::move(id));
      chunk.clear();
      return "";
    };
    char buffer[1 << 16];
    while (read_bytes <= size) {
      ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      absl::string_view bytes(buffer, static_cast<size_t>(n));
      sha.Update(bytes);
      read_bytes += bytes.size();
      if (sink_ == nullptr) continue;
      while (!bytes.empty()) {
        size_t take = std::min<size_t>(bytes.size(), kSnapshotChunkBytes - chunk.size());
        chunk.append(bytes.data(), take);
        bytes.remove_prefix(take);
        if (chunk.size() == kSnapshotChunkBytes) {
          if (std::string why = hand_on(); !why.empty()) return why;
        }
      }
    }
    if (read_bytes != size) return "changed size while it was read";
    if (std::string why = hand_on(); !why.empty()) return why;
    file.sha256 = DigestHex(sha.Finish());
    return "";
  }

  const CacheDirSpec& spec_;
  const SnapshotLimits& limits_;
  SnapshotSink* sink_;
  const bool stat_only_;
  SnapshotListing listing_;
};

}  // namespace

namespace {

absl::StatusOr<SnapshotListing> Walk(const CacheDirSpec& spec, const std::string& dir,
                                     const SnapshotLimits& limits, SnapshotSink* sink,
                                     bool stat_only) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(spec.name, "'s cache directory ", dir, " is absent"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        spec.name, "'s cache directory ", dir, " cannot be read as a directory (",
        errno == ELOOP || errno == ENOTDIR ? "a link or not a directory" : strerror(errno), ")"));
  }
  Walker walker(spec, limits, sink, stat_only);
  walker.Directory(fd, "");
  return walker.Take();
}

}  // namespace

absl::StatusOr<SnapshotListing> ListSnapshotFiles(const CacheDirSpec& spec, const std::string& dir,
                                                  const SnapshotLimits& limits,
                                                  SnapshotSink* sink) {
  return Walk(spec, dir, limits, sink, /*stat_only=*/false);
}

absl::StatusOr<SnapshotListing> StatSnapshotFiles(const CacheDirSpec& spec, const std::string& dir,
                                                  const SnapshotLimits& limits) {
  return Walk(spec, dir, limits, nullptr, /*stat_only=*/true);
}

}  // namespace kcache::cache_dirs
