#include "engine/keys/file_digests.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/file_io.h"
#include "core/xxh128.h"
#include "engine/keys/content_digest.h"
#include "engine/keys/elf_link_interface.h"

namespace kcache::objects {
namespace {

// 2: files from kTreeBytes on are digested as a tree of chunks (FileDigest::hex).
// 3: XXH3-128, not SHA-256.
constexpr char kTableMagic[] = "kcache-file-digests 3";

absl::Time Changed(const struct stat& st) {
  return std::max(absl::TimeFromTimespec(st.st_mtim), absl::TimeFromTimespec(st.st_ctim));
}

// How a digest of `kind` is spelled: its prefix before the hex digits.
absl::string_view SpelledPrefix(DigestKind kind) {
  return kind == DigestKind::kLinkInput ? kLinkInputPrefix : "";
}

// The memo's name for `path`'s digest of `kind`.
std::string MemoKey(const std::string& path, DigestKind kind) {
  switch (kind) {
    case DigestKind::kContent:
      return path;
    case DigestKind::kLinkInput:
      return absl::StrCat(kLinkInputPrefix, path);
    case DigestKind::kTool:
      return absl::StrCat("tool:", path);
  }
  return path;
}

// What a manifest line's value asks a check to find.
enum class Want : uint8_t {
  kDigest,    // the content digest (of a DigestKind)
  kAbsent,    // ENOENT or ENOTDIR
  kExists,    // stat's type
  kLexists,   // lstat's type
  kFailed,    // stat failing with an errno
  kReadlink,  // readlink's target
  kRealpath,  // realpath's answer
  kListing,   // ListingDigest's
};
struct Wanted {
  Want want = Want::kDigest;
  DigestKind kind = DigestKind::kContent;
  absl::string_view value;          // the hex digits, the type, the errno, the target or the answer
  bool resolves_to_itself = false;  // kResolvesToItselfMark
};

Wanted WantOfUnmarked(absl::string_view recorded);

// What a recorded value asks for, and its value without its prefix.
Wanted WantOf(absl::string_view recorded) {
  bool itself = absl::ConsumePrefix(&recorded, kResolvesToItselfMark);
  Wanted wanted = WantOfUnmarked(recorded);
  wanted.resolves_to_itself = itself && wanted.want == Want::kDigest;
  return wanted;
}

Wanted WantOfUnmarked(absl::string_view recorded) {
  if (absl::ConsumePrefix(&recorded, kLinkInputPrefix)) {
    return {Want::kDigest, DigestKind::kLinkInput, recorded};
  }
  if (absl::ConsumePrefix(&recorded, kToolPrefix))
    return {Want::kDigest, DigestKind::kTool, recorded};
  if (recorded == kAbsentFact) return {Want::kAbsent, DigestKind::kContent, recorded};
  struct Prefix {
    absl::string_view prefix;
    Want want;
  };
  static constexpr Prefix kFacts[] = {
      {kExistsPrefix, Want::kExists},     {kLexistsPrefix, Want::kLexists},
      {kFailedPrefix, Want::kFailed},     {kReadlinkPrefix, Want::kReadlink},
      {kRealpathPrefix, Want::kRealpath}, {kListingPrefix, Want::kListing},
  };
  for (const Prefix& fact : kFacts) {
    if (absl::ConsumePrefix(&recorded, fact.prefix)) {
      return {fact.want, DigestKind::kContent, recorded};
    }
  }
  return {Want::kDigest, DigestKind::kContent, recorded};
}

// Whether the fact `wanted` (not a digest) holds for `path` (`name` its last component's
// offset, `dir` its directory's descriptor or AT_FDCWD). `real_dir`: realpath of the path's
// directory (kRealpath), "" when it has none.
bool FactHolds(const Wanted& wanted, int dir, const std::string& path, size_t name,
               const std::string& real_dir) {
  const char* at = path.c_str() + name;
  struct stat st {};
  switch (wanted.want) {
    case Want::kDigest:
      return false;
    case Want::kAbsent:
      return fstatat(dir, at, &st, 0) != 0 && (errno == ENOENT || errno == ENOTDIR);
    case Want::kExists:
      return fstatat(dir, at, &st, 0) == 0 && FileTypeName(st) == wanted.value;
    case Want::kLexists:
      return fstatat(dir, at, &st, AT_SYMLINK_NOFOLLOW) == 0 && FileTypeName(st) == wanted.value;
    case Want::kFailed:
      return fstatat(dir, at, &st, 0) != 0 && absl::StrCat(errno) == wanted.value;
    case Want::kReadlink: {
      char target[4096];
      ssize_t n = readlinkat(dir, at, target, sizeof target);
      return n >= 0 && static_cast<size_t>(n) < sizeof target &&
             absl::string_view(target, static_cast<size_t>(n)) == wanted.value;
    }
    case Want::kRealpath: {
      absl::string_view last(at);
      // No symbolic link in the last component: the directory's realpath and the name.
      if (!real_dir.empty() && last != "." && last != ".." && !last.empty() &&
          fstatat(dir, at, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISLNK(st.st_mode)) {
        return absl::StrCat(real_dir == "/" ? "" : real_dir, "/", last) == wanted.value;
      }
      std::unique_ptr<char, void (*)(void*)> real(realpath(path.c_str(), nullptr), free);
      return real != nullptr && wanted.value == real.get();
    }
    case Want::kListing: {
      absl::StatusOr<std::string> listing = ListingDigest(path);
      return listing.ok() && *listing == wanted.value;
    }
  }
  return false;
}

// The digest of `path`, opened through `dir` (its directory's descriptor, or AT_FDCWD) at
// path + name; *st is its stat. Its hex digits, without kind's prefix.
absl::StatusOr<FileDigest> ReadDigest(int dir, const std::string& path, size_t name,
                                      struct stat* st, DigestKind kind) {
  int fd = openat(dir, path.c_str() + name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = absl::StrCat("cannot read ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::FailedPreconditionError(message);
  }
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { close(*f); });
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  FileDigest digest;
  digest.changed = Changed(*st);
  if (kind == DigestKind::kLinkInput) {
    std::optional<std::string> interface =
        ElfLinkInterfaceDigest(fd, static_cast<uint64_t>(st->st_size));
    if (interface.has_value()) {
      digest.hex = *std::move(interface);
      return digest;
    }
  }
  absl::StatusOr<std::pair<std::string, bool>> content =
      ContentDigest(fd, static_cast<uint64_t>(st->st_size), path, kind != DigestKind::kTool);
  if (!content.ok()) return content.status();
  digest.hex = std::move(content->first);
  digest.has_time_macro = content->second;
  return digest;
}

}  // namespace

absl::string_view FileTypeName(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return "file";
  if (S_ISDIR(st.st_mode)) return "dir";
  if (S_ISLNK(st.st_mode)) return "symlink";
  return "other";
}

absl::StatusOr<std::string> ListingDigest(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> stream(opendir(dir.c_str()), closedir);
  if (stream == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list ", dir, ": ", std::strerror(errno)));
  }
  std::vector<std::string> names;
  while (dirent* entry = readdir(stream.get())) {
    absl::string_view name(entry->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  Xxh128 hash;
  for (const std::string& name : names) {
    hash.Update(name);
    hash.Update(absl::string_view("\0", 1));
  }
  return hash.Finish().Hex();
}

FileDigests::FileDigests(std::string table_path, absl::Duration settle)
    : table_path_(std::move(table_path)), settle_(settle) {
  Load();
}

FileDigests::~FileDigests() { BeginPass(); }

void FileDigests::BeginPass() {
  for (const auto& [dir, fd] : directories_) {
    if (fd >= 0) close(fd);
  }
  directories_.clear();
}

bool FileDigests::StatKey::operator==(const StatKey& other) const {
  return std::equal(std::begin(values), std::end(values), std::begin(other.values));
}

FileDigests::StatKey FileDigests::KeyOf(const struct stat& st) {
  StatKey key;
  key.values[0] = st.st_dev;
  key.values[1] = st.st_ino;
  key.values[2] = static_cast<uint64_t>(st.st_size);
  key.values[3] = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ULL + st.st_mtim.tv_nsec;
  key.values[4] = static_cast<uint64_t>(st.st_ctim.tv_sec) * 1000000000ULL + st.st_ctim.tv_nsec;
  return key;
}

// The table is read whole and indexed in place: each line's path, a view, to a view of its
// other fields, parsed when the path is looked up. A launcher loads thousands of lines for
// each command (for a torch extension's compile, ~5 900) and looks up only its own files:
// making an entry of every line was 3-5 ms of a ~30 ms hit.
void FileDigests::Load() {
  if (table_path_.empty()) return;
  absl::StatusOr<std::string> read = ReadWholeFile(table_path_);
  if (!read.ok()) return;
  table_ = *std::move(read);
  const char* at = table_.data();
  const char* const end = table_.data() + table_.size();
  const char* first_end = static_cast<const char*>(memchr(at, '\n', end - at));
  if (first_end == nullptr || absl::string_view(at, first_end - at) != kTableMagic) return;
  at = first_end + 1;
  loaded_.reserve(static_cast<size_t>(std::count(at, end, '\n')));
  // Each line: hex \t time-macro(0/1) \t "dev ino size mtime_ns ctime_ns" \t path. A line
  // without its three tabs is skipped here, one whose fields do not parse when looked up.
  while (at < end) {
    const char* line_end = static_cast<const char*>(memchr(at, '\n', end - at));
    if (line_end == nullptr) line_end = end;
    absl::string_view line(at, line_end - at);
    size_t first_tab = line.find('\t');
    size_t path_tab = first_tab == kDigestHexDigits
                          ? line.find('\t', line.find('\t', kDigestHexDigits + 1) + 1)
                          : line.npos;
    if (path_tab != line.npos && path_tab + 1 < line.size()) {
      loaded_[line.substr(path_tab + 1)] = line.substr(0, path_tab);
    }
    at = line_end + 1;
  }
}

std::optional<FileDigests::Known> FileDigests::Find(absl::string_view path) const {
  if (auto it = entries_.find(path); it != entries_.end()) {
    return Known{it->second.stat, it->second.digest.hex, it->second.digest.has_time_macro};
  }
  auto it = loaded_.find(path);
  if (it == loaded_.end()) return std::nullopt;
  absl::string_view fields = it->second;  // hex \t macro \t five numbers
  constexpr size_t kMacro = kDigestHexDigits + 1, kNumbers = kDigestHexDigits + 3;
  Known known;
  known.hex = fields.substr(0, kDigestHexDigits);
  if (fields.size() < kNumbers + 1 || fields[kMacro - 1] != '\t' || fields[kMacro + 1] != '\t') {
    return std::nullopt;
  }
  known.has_time_macro = fields[kMacro] == '1';
  const char* at = fields.data() + kNumbers;
  const char* const end = fields.data() + fields.size();
  for (int i = 0; i < 5; ++i) {
    std::from_chars_result parsed = std::from_chars(at, end, known.stat.values[i]);
    if (parsed.ec != std::errc() ||
        (i < 4 ? (parsed.ptr == end || *parsed.ptr != ' ') : parsed.ptr != end)) {
      return std::nullopt;
    }
    at = parsed.ptr + 1;
  }
  return known;
}

std::pair<int, size_t> FileDigests::Directory(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return {AT_FDCWD, 0};
  absl::string_view dir(path.data(), slash);
  auto it = directories_.find(dir);
  if (it == directories_.end()) {
    if (directories_.size() >= kMaxDirectories) return {AT_FDCWD, 0};
    std::string dir_path(dir);
    it = directories_.emplace(dir_path, open(dir_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC))
             .first;
  }
  // A directory that would not open: the path's own errors (ENOENT, EACCES) then say why.
  if (it->second < 0) return {AT_FDCWD, 0};
  return {it->second, slash + 1};
}

bool FileDigests::Vouches(const std::optional<Known>& known, int dir, const char* name,
                          struct stat* st) {
  return known.has_value() && fstatat(dir, name, st, 0) == 0 && S_ISREG(st->st_mode) &&
         known->stat == KeyOf(*st);
}

void FileDigests::Save() {
  if (table_path_.empty() || !dirty_) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(table_path_).parent_path(), ec);
  std::string text = absl::StrCat(kTableMagic, "\n");
  for (const auto& [path, fields] : loaded_) {
    // A line learned over here is written below; a damaged one, never again.
    if (!entries_.contains(path) && Find(path).has_value()) {
      absl::StrAppend(&text, fields, "\t", path, "\n");
    }
  }
  for (const auto& [path, entry] : entries_) {
    if (path.find('\n') != std::string::npos) continue;
    const uint64_t* v = entry.stat.values;
    absl::StrAppend(&text, entry.digest.hex, "\t", entry.digest.has_time_macro ? "1" : "0", "\t",
                    v[0], " ", v[1], " ", v[2], " ", v[3], " ", v[4], "\t", path, "\n");
  }
  if (!WriteFileAtomically(table_path_, text).ok()) return;  // the memo is only a shortcut
  dirty_ = false;
}

void FileDigests::Remember(const std::string& path, const struct stat& st, const FileDigest& digest,
                           absl::Time read_at) {
  if (digest.changed + settle_ > read_at) return;
  entries_[path] = Entry{KeyOf(st), digest};
  dirty_ = true;
}

absl::StatusOr<FileDigest> FileDigests::Digest(const std::string& path, DigestKind kind) {
  return std::move(DigestAll({path}, kind).front());
}

std::vector<absl::StatusOr<FileDigest>> FileDigests::DigestAll(
    const std::vector<std::string>& paths, DigestKind kind) {
  absl::string_view prefix = SpelledPrefix(kind);
  std::vector<absl::StatusOr<FileDigest>> digests(paths.size(), absl::UnknownError("not digested"));
  // Serially: what the memo vouches for; the rest's directories.
  struct Pending {
    size_t index;
    int dir;
    size_t name;
    struct stat st;
    absl::Time read_at;  // before the read: an edit after it changes the stat
  };
  std::vector<Pending> pending;
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat st {};
    std::optional<Known> known = Find(MemoKey(paths[i], kind));
    auto [dir, name] = Directory(paths[i]);
    if (Vouches(known, dir, paths[i].c_str() + name, &st)) {
      FileDigest digest;
      digest.hex = absl::StrCat(prefix, known->hex);
      digest.has_time_macro = known->has_time_macro;
      digest.changed = Changed(st);
      digests[i] = std::move(digest);
    } else {
      pending.push_back(Pending{i, dir, name, {}, {}});
    }
  }
  // In parallel: read and hash, a file per thread at a time.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t p = next++; p < pending.size(); p = next++) {
      Pending& file = pending[p];
      file.read_at = absl::Now();
      digests[file.index] = ReadDigest(file.dir, paths[file.index], file.name, &file.st, kind);
    }
  };
  size_t threads = std::min<size_t>(
      {kMaxCheckThreads, std::max(1u, std::thread::hardware_concurrency()), pending.size()});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  // Serially: memoized as read (the memo keeps the hex digits), then spelled with the kind.
  for (const Pending& file : pending) {
    absl::StatusOr<FileDigest>& digest = digests[file.index];
    if (!digest.ok()) continue;
    Remember(MemoKey(paths[file.index], kind), file.st, *digest, file.read_at);
    digest->hex.insert(0, prefix.data(), prefix.size());
  }
  return digests;
}

// FirstMismatch's plan for one file: its directory's descriptor (Directory), its memo entry
// and what it wants.
struct FileDigests::Check {
  int dir;
  size_t name;
  Wanted wanted;
  std::optional<Known> memo;
  const std::string* real_dir;  // kRealpath: realpath of the path's directory ("" if none)
  bool no_link;                 // Wanted::resolves_to_itself
};

// What PlanChecks makes of a manifest's files.
struct FileDigests::CheckPlan {
  std::vector<Check> checks;  // one per file, in order
  size_t first_unresolved;    // the first whose directories hold a link; files.size() if none
  // Each directory a realpath answer is checked in, resolved once (a compile's preprocessor
  // asks it of every header: thousands of headers in a few hundred directories). Stable:
  // checks point into it.
  std::unordered_map<std::string, std::string> real_dirs;
  // Whether each directory prefix seen is a directory and no symbolic link (lstat'ed once).
  absl::flat_hash_map<std::string, bool> real_prefixes;
};

// A file FirstMismatch read and hashed, to memoize.
struct FileDigests::Read {
  struct stat st;
  FileDigest digest;
  absl::Time read_at;
  bool ok = false;
};

void FileDigests::PlanChecks(const std::vector<Expected>& files, CheckPlan* plan) {
  auto resolves_to_itself = [plan](const std::string& path) {
    for (size_t slash = path.find('/', 1); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      auto [it, inserted] = plan->real_prefixes.try_emplace(path.substr(0, slash), false);
      if (inserted) {
        struct stat st {};
        absl::string_view last = absl::string_view(it->first).substr(it->first.rfind('/') + 1);
        it->second = last != "." && last != ".." && lstat(it->first.c_str(), &st) == 0 &&
                     S_ISDIR(st.st_mode);
      }
      if (!it->second) return false;
    }
    return true;
  };
  static const std::string kNoDir;
  plan->first_unresolved = files.size();
  plan->checks.reserve(files.size());
  for (const Expected& file : files) {
    auto [dir, name] = Directory(file.path);
    Wanted wanted = WantOf(file.digest);
    const std::string* real_dir = &kNoDir;
    std::optional<Known> memo;
    if (wanted.want == Want::kDigest) {
      memo =
          Find(wanted.kind == DigestKind::kContent ? file.path : MemoKey(file.path, wanted.kind));
    } else if (wanted.want == Want::kRealpath) {
      size_t slash = file.path.rfind('/');
      std::string parent = slash == 0 ? "/" : file.path.substr(0, slash);
      auto [it, inserted] = plan->real_dirs.try_emplace(parent);
      if (inserted && slash != std::string::npos) {
        std::unique_ptr<char, void (*)(void*)> real(realpath(parent.c_str(), nullptr), free);
        if (real != nullptr) it->second = real.get();
      }
      real_dir = &it->second;
    }
    if (wanted.resolves_to_itself && plan->first_unresolved == files.size() &&
        !resolves_to_itself(file.path)) {
      plan->first_unresolved = plan->checks.size();
    }
    plan->checks.push_back(
        Check{dir, name, wanted, std::move(memo), real_dir, wanted.resolves_to_itself});
  }
}

bool FileDigests::Matches(const Expected& file, const Check& check, Read* read) {
  if (check.wanted.want != Want::kDigest) {
    return FactHolds(check.wanted, check.dir, file.path, check.name, *check.real_dir);
  }
  struct stat st {};
  if (check.no_link &&
      (fstatat(check.dir, file.path.c_str() + check.name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
       S_ISLNK(st.st_mode))) {
    return false;
  }
  if (Vouches(check.memo, check.dir, file.path.c_str() + check.name, &st)) {
    return check.memo->hex == check.wanted.value;
  }
  read->read_at = absl::Now();
  absl::StatusOr<FileDigest> digest =
      ReadDigest(check.dir, file.path, check.name, &read->st, check.wanted.kind);
  if (!digest.ok()) return false;
  bool matches = digest->hex == check.wanted.value;
  read->digest = *std::move(digest);
  read->ok = true;
  return matches;
}

size_t FileDigests::FirstMismatch(const std::vector<Expected>& files) {
  // Serially: each file's directory descriptor (opened here once) and memo entry.
  CheckPlan plan;
  PlanChecks(files, &plan);
  // In parallel: stat and compare; a file the memo does not vouch for is read and hashed
  // (kept in `read` to memoize below). `first_bad` only decreases: chunks are taken in order,
  // so every file before it has been checked when the threads are done.
  std::vector<Read> read(files.size());
  constexpr size_t kChunk = 64;
  std::atomic<size_t> next_chunk{0};
  std::atomic<size_t> first_bad{files.size()};
  auto bad = [&first_bad](size_t i) {
    size_t seen = first_bad.load();
    while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
    }
  };
  auto work = [&] {
    for (size_t begin = kChunk * next_chunk++; begin < files.size();
         begin = kChunk * next_chunk++) {
      for (size_t i = begin; i < std::min(begin + kChunk, files.size()); ++i) {
        if (i >= first_bad.load()) return;
        if (!Matches(files[i], plan.checks[i], &read[i])) bad(i);
      }
    }
  };
  size_t threads = 1;
  if (files.size() >= kParallelFrom) {
    threads = std::min<size_t>({kMaxCheckThreads, std::max(1u, std::thread::hardware_concurrency()),
                                (files.size() + kChunk - 1) / kChunk});
  }
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  // Serially: what was read, memoized.
  for (size_t i = 0; i < files.size(); ++i) {
    if (read[i].ok) {
      Remember(MemoKey(files[i].path, plan.checks[i].wanted.kind), read[i].st, read[i].digest,
               read[i].read_at);
    }
  }
  return std::min(first_bad.load(), plan.first_unresolved);
}

}  // namespace kcache::objects
