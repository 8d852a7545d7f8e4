#include "engine/objects/file_digests.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kcache::objects {
namespace {

constexpr char kTableMagic[] = "kcache-file-digests 1";

std::string StatKey(const struct stat& st) {
  return absl::StrCat(st.st_dev, " ", st.st_ino, " ", st.st_size, " ",
                      st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec, " ",
                      st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec);
}

absl::Time Changed(const struct stat& st) {
  return std::max(absl::TimeFromTimespec(st.st_mtim), absl::TimeFromTimespec(st.st_ctim));
}

// memmem, not std::string::find: find stops at every '_' (headers are full of them) and
// was a fifth of the time a launcher spent digesting torch's headers.
bool HasTimeMacro(const std::string& text) {
  for (absl::string_view macro : {"__DATE__", "__TIME__", "__TIMESTAMP__"}) {
    if (memmem(text.data(), text.size(), macro.data(), macro.size()) != nullptr) return true;
  }
  return false;
}

}  // namespace

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

FileDigests::FileDigests(std::string table_path, absl::Duration settle)
    : table_path_(std::move(table_path)), settle_(settle) {
  Load();
}

void FileDigests::Load() {
  if (table_path_.empty()) return;
  std::ifstream in(table_path_);
  std::string line;
  if (!std::getline(in, line) || line != kTableMagic) return;
  // Each line: sha256 \t time-macro(0/1) \t stat key \t path
  while (std::getline(in, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits('\t', 3));
    if (parts.size() != 4 || parts[0].size() != 64) continue;
    entries_[parts[3]] = Entry{parts[2], FileDigest{parts[0], parts[1] == "1", absl::Time()}};
  }
}

void FileDigests::Save() {
  if (table_path_.empty() || !dirty_) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(table_path_).parent_path(), ec);
  std::string tmp = absl::StrCat(table_path_, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kTableMagic << "\n";
    for (const auto& [path, entry] : entries_) {
      if (path.find('\n') != std::string::npos) continue;
      out << entry.digest.sha256 << '\t' << (entry.digest.has_time_macro ? "1" : "0") << '\t'
          << entry.stat_key << '\t' << path << '\n';
    }
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, table_path_, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  dirty_ = false;
}

absl::StatusOr<FileDigest> FileDigests::Digest(const std::string& path) {
  struct stat st {};
  auto it = entries_.find(path);
  if (it != entries_.end() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      it->second.stat_key == StatKey(st)) {
    FileDigest digest = it->second.digest;
    digest.changed = Changed(st);
    return digest;
  }
  absl::Time read_at = absl::Now();  // before the read: an edit after it changes the stat
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = absl::StrCat("cannot read ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::FailedPreconditionError(message);
  }
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { close(*f); });
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  std::string content(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = read(fd, content.data() + done, content.size() - done);
    if (n <= 0) {
      return absl::FailedPreconditionError(absl::StrCat("cannot read all of ", path));
    }
    done += static_cast<size_t>(n);
  }
  FileDigest digest{Sha256Hex(content), HasTimeMacro(content), Changed(st)};
  if (digest.changed + settle_ <= read_at) {
    entries_[path] = Entry{StatKey(st), digest};
    dirty_ = true;
  }
  return digest;
}

}  // namespace kcache::objects
