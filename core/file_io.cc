#include "core/file_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kcache {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = absl::StrCat("cannot read '", path, "': ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::FailedPreconditionError(message);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read '", path, "': not a regular file"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = PreadFull(fd, 0, bytes.data(), bytes.size());
  close(fd);
  if (got != bytes.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read '", path, "' whole: ", got, " of ", bytes.size(), " bytes"));
  }
  return bytes;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  std::string temporary = absl::StrCat(path, ".kcache-", getpid(), ".tmp");
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write '", temporary, "': ", std::strerror(errno)));
  }
  size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(temporary.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    std::remove(temporary.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write '", path, "': ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadToEnd(int fd, uint64_t max_bytes, absl::Time deadline) {
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    if (deadline != absl::InfiniteFuture()) {
      absl::Duration left = deadline - absl::Now();
      pollfd ready{fd, POLLIN, 0};
      int polled = left > absl::ZeroDuration() ? poll(&ready, 1,
                                                      static_cast<int>(absl::ToInt64Milliseconds(
                                                          absl::Ceil(left, absl::Milliseconds(1)))))
                                               : 0;
      if (polled < 0 && errno == EINTR) continue;
      if (polled == 0) return absl::DeadlineExceededError("its end did not come in time");
    }
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("read failed: ", std::strerror(errno)));
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<size_t>(n));
    if (bytes.size() > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("more than ", max_bytes, " bytes"));
    }
  }
}

absl::Status WriteFull(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("write: ", strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

size_t PreadFull(int fd, uint64_t offset, char* into, size_t length) {
  size_t done = 0;
  while (done < length) {
    ssize_t n = pread(fd, into + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace kcache
