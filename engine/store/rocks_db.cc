#include "engine/store/rocks_db.h"

#include <fcntl.h>
#include <rocksdb/convenience.h>
#include <rocksdb/env.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/store/value_format.h"

namespace kcache::store_internal {
namespace {

namespace fs = std::filesystem;

// Read-only opens need a positive max_open_files: with -1, a compacted store with blob
// files answers NotFound (facebook/rocksdb#12503).
constexpr int kReadOnlyMaxOpenFiles = 1000;

rocksdb::CompressionType MetadataCompression() {
  std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  bool zstd = std::find(supported.begin(), supported.end(), rocksdb::kZSTD) != supported.end();
  return zstd ? rocksdb::kZSTD : rocksdb::kNoCompression;
}

// For opens that must not write RocksDB's LOG (StoreOptions::rocksdb_log).
class DiscardingLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*args*/) override {}
};

}  // namespace

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(message);
  if (s.IsNoSpace())
    return absl::ResourceExhaustedError(absl::StrCat(message, "; the disk is full"));
  if (s.IsIOError() && absl::StrContains(s.ToString(), "lock")) {
    return absl::FailedPreconditionError(
        absl::StrCat(message,
                     "; another kcached or kcache warm (or this process) has it "
                     "open for writing"));
  }
  if (s.IsIOError() || s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

bool IsDamage(const rocksdb::Status& s) {
  if (s.IsCorruption() || s.IsPathNotFound()) return true;
  // RocksDB 7.8 reports a vanished blob or table file as a plain I/O error.
  std::string text = s.ToString();
  return s.IsIOError() && (absl::StrContains(text, "No such file") ||
                           absl::StrContains(text, ".blob") || absl::StrContains(text, ".sst"));
}

const std::vector<std::string>& RequiredFamilies() {
  static const auto* families =
      new std::vector<std::string>{rocksdb::kDefaultColumnFamilyName, kArtifactsFamily,
                                   kArtifactMetaFamily, kKernelsFamily, kMetaFamily};
  return *families;
}

rocksdb::ColumnFamilyOptions FamilyOptions(const std::string& name, const StoreOptions& options) {
  rocksdb::ColumnFamilyOptions cf;
  cf.compression = rocksdb::kNoCompression;  // artifact and kernel values carry their own zstd
  if (name == kArtifactsFamily) {
    cf.enable_blob_files = true;
    cf.min_blob_size = options.min_blob_size;
    cf.blob_compression_type = rocksdb::kNoCompression;
    cf.enable_blob_garbage_collection = true;  // reclaims replaced and deleted artifacts
  } else if (name == kArtifactMetaFamily) {
    cf.compression = MetadataCompression();  // many small, similar values: compress blocks
  }
  return cf;
}

rocksdb::DBOptions BaseDbOptions(const StoreOptions& options) {
  rocksdb::DBOptions db;
  db.keep_log_file_num = 3;
  db.max_log_file_size = 4 << 20;
  if (options.read_only) db.max_open_files = kReadOnlyMaxOpenFiles;
  if (options.env != nullptr) db.env = options.env;
  if (options.open_files_lazily) {
    db.max_file_opening_threads = 1;
    db.skip_stats_update_on_db_open = true;
  }
  if (options.read_only || !options.rocksdb_log) {
    static const std::shared_ptr<rocksdb::Logger> discard = std::make_shared<DiscardingLogger>();
    db.info_log = discard;
  }
  return db;
}

OpenDb::~OpenDb() {
  if (db == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* handle : retired) {
    db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  if (!read_only) db->Flush(rocksdb::FlushOptions(), handles).PermitUncheckedError();
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  db->Close().PermitUncheckedError();
}

rocksdb::ColumnFamilyHandle* OpenDb::Family(absl::string_view name) const {
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    if (handle->GetName() == name) return handle;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<OpenDb>> OpenFamilies(const std::string& path,
                                                     const rocksdb::DBOptions& db_options,
                                                     const std::vector<std::string>& families,
                                                     const StoreOptions& options) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : families) {
    descriptors.emplace_back(name, FamilyOptions(name, options));
  }
  auto open = std::make_unique<OpenDb>();
  open->read_only = options.read_only;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      options.read_only
          ? rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &open->handles, &db)
          : rocksdb::DB::Open(db_options, path, descriptors, &open->handles, &db);
  if (!s.ok()) return FromRocks(s, absl::StrCat("cannot open the kcache store at ", path));
  open->db.reset(db);
  return open;
}

std::optional<uint64_t> FreeBytes(rocksdb::Env* env, const std::string& path) {
  if (env == nullptr) env = rocksdb::Env::Default();
  uint64_t free = 0;
  if (!env->GetFreeSpace(path, &free).ok()) return std::nullopt;
  return free;
}

bool LooksLikeKcacheStore(const std::string& path) {
  std::error_code ec;
  bool rocks = false, ours = false;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    std::string name = entry.path().filename().string();
    if (name == "CURRENT" || absl::StartsWith(name, "MANIFEST-")) rocks = true;
    if (absl::StartsWith(name, "OPTIONS-") && !ours) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ours = absl::StrContains(text, absl::StrCat("[CFOptions \"", kArtifactMetaFamily, "\"]"));
    }
  }
  return rocks && ours;
}

bool LockHeldElsewhere(const std::string& path) {
  int fd = open((fs::path(path) / "LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  // An open-file-description query sees every process's lock, this one's included.
  struct flock probe = {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  if (fcntl(fd, F_OFD_GETLK, &probe) != 0) {
    close(fd);
    return false;
  }
  if (probe.l_type != F_UNLCK && probe.l_pid == getpid()) {
    // This process holds it: closing any descriptor of the file would drop RocksDB's lock,
    // so this one is left open (a process never inspects a store it has open but in tests).
    return false;
  }
  close(fd);
  return probe.l_type != F_UNLCK;
}

absl::StatusOr<std::string> MoveAside(const std::string& path) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    if (absl::StartsWith(entry.path().filename().string(), kDamagedPrefix)) {
      fs::remove_all(entry.path(), ec);  // keep only the newest damaged copy
    } else {
      entries.push_back(entry.path());
    }
  }
  int64_t now_ms = NowUnixMillis();
  fs::path aside = fs::path(path) / absl::StrCat(kDamagedPrefix, now_ms);
  fs::create_directories(aside, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot make ", aside.string(),
                                            " to move a damaged store aside: ", ec.message()));
  }
  for (const fs::path& entry : entries) {
    fs::rename(entry, aside / entry.filename(), ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot move ", entry.string(), " aside into ",
                                              aside.string(), ": ", ec.message()));
    }
  }
  return aside.string();
}

}  // namespace kcache::store_internal
