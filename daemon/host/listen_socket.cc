#include "daemon/host/listen_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kcache {
namespace {

// True when a server accepts connections on the unix socket at `path`.
bool SomeoneAnswers(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool answered = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return answered;
}

// Creates `folder` and any missing parents with mode 0755 whatever the umask (mkdir applies
// the umask, so each folder created is set with chmod); folders already there are left as
// they are.
absl::Status CreateSocketFolder(const std::filesystem::path& folder) {
  std::error_code ec;
  if (folder.empty() || std::filesystem::exists(folder, ec)) return absl::OkStatus();
  if (absl::Status s = CreateSocketFolder(folder.parent_path()); !s.ok()) return s;
  if (mkdir(folder.c_str(), 0755) != 0) {
    if (errno == EEXIST) return absl::OkStatus();  // created meanwhile by someone else
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the socket's folder ", folder.string(), ": ",
                     std::strerror(errno), "; create it or choose another --listen path"));
  }
  if (chmod(folder.c_str(), 0755) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot set the mode of the socket's folder ",
                                                      folder.string(), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string UnixSocketPath(absl::string_view address) {
  if (absl::StartsWith(address, "unix://")) return std::string(address.substr(7));
  if (absl::StartsWith(address, "unix:")) return std::string(address.substr(5));
  return "";
}

absl::Status PrepareSocketPath(const std::string& path, bool* removed_stale) {
  *removed_stale = false;
  if (path.empty()) return absl::InvalidArgumentError("--listen names an empty socket path");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path ", path, " is ", path.size(), " bytes; unix sockets allow at most ",
        sizeof(sockaddr_un::sun_path) - 1, ": choose a shorter --listen path"));
  }
  if (absl::Status s = CreateSocketFolder(std::filesystem::path(path).parent_path()); !s.ok()) {
    return s;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot inspect ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " exists and is not a socket; remove it or choose another --listen path"));
  }
  if (SomeoneAnswers(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("another server (probably a live kcached) is listening on ", path,
                     "; stop it first or choose another --listen path"));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove the stale socket ", path, ": ", std::strerror(errno)));
  }
  *removed_stale = true;
  return absl::OkStatus();
}

absl::StatusOr<mode_t> ParseSocketMode(absl::string_view text) {
  uint32_t mode = 0;
  bool digits = !text.empty() && text.size() <= 4 &&
                text.find_first_not_of("01234567") == absl::string_view::npos;
  if (!digits || !absl::numbers_internal::safe_strtou32_base(text, &mode, 8) || mode > 0777) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--socket-mode '", text, "' is not an octal permission mode; write it like 0660"));
  }
  return static_cast<mode_t>(mode);
}

absl::Status SetSocketMode(const std::string& path, mode_t mode) {
  if (chmod(path.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot set the mode of ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

void RemoveSocketFile(const std::string& path, ino_t inode) {
  if (inode != 0 && InodeOf(path) == inode) unlink(path.c_str());
}

}  // namespace kcache
