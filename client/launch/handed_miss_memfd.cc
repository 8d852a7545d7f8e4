// A miss's record across the exec from kcache-launch to kcache: a sealed memfd.
#include "client/launch/handed_miss_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/launch/handed_miss_record.h"
#include "core/environment.h"

extern char** environ;

namespace kcache::launch {
namespace {

// The seals a record's memfd carries: nothing can change its bytes once written.
constexpr int kSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

// This process's command, working directory and environment, bound (BindCommand).
Sha256Digest ThisCommand(char** argv) {
  std::vector<std::string> args, env;
  for (char** arg = argv; *arg != nullptr; ++arg) args.emplace_back(*arg);
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    env.emplace_back(*entry);
  }
  std::error_code ec;
  return BindCommand(args, std::filesystem::current_path(ec).string(), env);
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::Status HandOnMiss(const objects::HandedMiss& miss, char** argv) {
  unsetenv(kHandedMissEnv);
  absl::StatusOr<std::string> record = EncodeHandedMiss(miss, ThisCommand(argv));
  if (!record.ok()) return record.status();
  int fd = memfd_create("kcache-handed-miss", MFD_ALLOW_SEALING);  // inherited by the exec
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (!WriteAll(fd, *record) || fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("the handed-miss record: ", std::strerror(errno)));
  }
  setenv(kHandedMissEnv, absl::StrCat(fd).c_str(), 1);
  return absl::OkStatus();
}

absl::StatusOr<objects::HandedMiss> TakeHandedMiss(char** argv) {
  std::optional<std::string> named = EnvIfSet(kHandedMissEnv);
  if (!named.has_value()) return absl::NotFoundError("no handed-miss record");
  std::string value = *std::move(named);
  unsetenv(kHandedMissEnv);
  int fd = -1;
  if (!absl::SimpleAtoi(value, &fd) || fd <= STDERR_FILENO) {
    return absl::InvalidArgumentError(
        absl::StrCat(kHandedMissEnv, "=", value.substr(0, 32), " names no record"));
  }
  if (fcntl(fd, F_GET_SEALS) != kSeals) {
    return absl::InvalidArgumentError(
        absl::StrCat(kHandedMissEnv, ": descriptor ", fd, " is not a sealed record"));
  }
  struct stat st {};
  std::string bytes;
  bool read_whole = fstat(fd, &st) == 0 && st.st_size >= 0 &&
                    static_cast<uint64_t>(st.st_size) <= kMaxHandedMissBytes;
  if (read_whole) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (read_whole && done < bytes.size()) {
      ssize_t n = pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      read_whole = n > 0;
      if (n > 0) done += static_cast<size_t>(n);
    }
  }
  close(fd);
  if (!read_whole) {
    return absl::DataLossError("the handed-miss record cannot be read whole, or is too large");
  }
  return DecodeHandedMiss(bytes, ThisCommand(argv));
}

}  // namespace kcache::launch
