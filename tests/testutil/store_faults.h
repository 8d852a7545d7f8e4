// Fault injection for store tests: a RocksDB Env whose disk can be made full (ENOSPC on every
// write, or little free space reported), and helpers that damage a closed store's files the
// way a bad disk does (a flipped bit, a truncated or missing file). Tests only.
#ifndef KCACHE_TESTS_TESTUTIL_STORE_FAULTS_H_
#define KCACHE_TESTS_TESTUTIL_STORE_FAULTS_H_

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/metadata.h>
#include <rocksdb/utilities/options_util.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace kcache::testing {

// A file system whose disk fills on demand: while `full`, creating or growing a file fails
// with NoSpace (ENOSPC) and GetFreeSpace reports `free_bytes`.
class FullDiskFileSystem : public rocksdb::FileSystemWrapper {
 public:
  FullDiskFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "FullDiskFileSystem"; }

  // ENOSPC on every write from now on (free space reported stays as set).
  std::atomic<bool> full{false};
  // What GetFreeSpace reports; UINT64_MAX: ask the real file system.
  std::atomic<uint64_t> free_bytes{UINT64_MAX};
  // True: once a write has failed with ENOSPC, GetFreeSpace reports 0 until `full` clears, as
  // a disk that filled up after a free-space check does (RocksDB then waits for room before
  // it retries, instead of retrying into a disk that is still full).
  std::atomic<bool> reports_full_after_enospc{false};

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    if (full) return NoSpace("injected ENOSPC creating " + name);
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, &file, dbg);
    if (s.ok()) result->reset(new File(std::move(file), this));
    return s;
  }
  rocksdb::IOStatus GetFreeSpace(const std::string& path, const rocksdb::IOOptions& options,
                                 uint64_t* free, rocksdb::IODebugContext* dbg) override {
    if (full && enospc_seen_ && reports_full_after_enospc) {
      *free = 0;
      return rocksdb::IOStatus::OK();
    }
    if (free_bytes != UINT64_MAX) {
      *free = free_bytes;
      return rocksdb::IOStatus::OK();
    }
    return target()->GetFreeSpace(path, options, free, dbg);
  }

 private:
  rocksdb::IOStatus NoSpace(const std::string& message) {
    enospc_seen_ = true;
    return rocksdb::IOStatus::NoSpace(message);
  }

  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> file, FullDiskFileSystem* fs)
        : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      if (fs_->full) return fs_->NoSpace("injected ENOSPC");
      return FSWritableFileOwnerWrapper::Append(data, options, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* dbg) override {
      if (fs_->full) return fs_->NoSpace("injected ENOSPC");
      return FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
    }
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
      if (fs_->full) return fs_->NoSpace("injected ENOSPC on sync");
      return FSWritableFileOwnerWrapper::Sync(options, dbg);
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                            rocksdb::IODebugContext* dbg) override {
      if (fs_->full) return fs_->NoSpace("injected ENOSPC on sync");
      return FSWritableFileOwnerWrapper::Fsync(options, dbg);
    }

   private:
    FullDiskFileSystem* fs_;
  };

  std::atomic<bool> enospc_seen_{false};
};

// The live SST files of each column family of the closed store at `path` (full paths).
inline std::vector<std::pair<std::string, std::string>> LiveSstFiles(const std::string& path) {
  rocksdb::ConfigOptions config;
  rocksdb::DBOptions options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  std::vector<std::pair<std::string, std::string>> out;
  if (!rocksdb::LoadLatestOptions(config, path, &options, &families).ok()) return out;
  options.max_open_files = 1000;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  if (!rocksdb::DB::OpenForReadOnly(options, path, families, &handles, &db).ok()) return out;
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  for (const rocksdb::LiveFileMetaData& file : files) {
    out.emplace_back(file.column_family_name, path + file.name);
  }
  for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  delete db;
  return out;
}

// Flips one bit of the file at `offset` (negative: from the end).
inline void FlipBit(const std::string& file, int64_t offset) {
  int64_t size = static_cast<int64_t>(std::filesystem::file_size(file));
  if (offset < 0) offset += size;
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.get(c);
  c ^= 0x10;
  f.seekp(offset);
  f.put(c);
}

// The first file in `dir` whose name starts with `prefix` and ends with `suffix` ("" if none).
inline std::string FileIn(const std::string& dir, const std::string& prefix,
                          const std::string& suffix = "") {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return entry.path().string();
    }
  }
  return "";
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_STORE_FAULTS_H_
