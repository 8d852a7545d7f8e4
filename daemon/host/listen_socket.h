// The daemon's unix socket: parsing --listen, preparing the path before gRPC binds it (parent
// folder, stale socket file), and its permissions.
#ifndef KCACHE_DAEMON_HOST_LISTEN_SOCKET_H_
#define KCACHE_DAEMON_HOST_LISTEN_SOCKET_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache {

// The file path of a "unix:///abs/path" or "unix:path" address; "" for any other address
// (a TCP "host:port", which gRPC binds as is).
std::string UnixSocketPath(absl::string_view address);

// Makes `path` ready to bind: creates its parent folders if missing, each
// with mode 0755 whatever the umask (folders already there keep theirs); if a file is there
// already, removes it when it is a socket nobody answers on (stale, left by a killed daemon),
// and refuses when something answers on it (FailedPrecondition: another daemon is live) or
// when it is not a socket. `removed_stale` says whether a stale socket was removed.
absl::Status PrepareSocketPath(const std::string& path, bool* removed_stale);

// Parses an octal mode ("0660", "660", "0600"); InvalidArgument unless it is 0..0777.
absl::StatusOr<mode_t> ParseSocketMode(absl::string_view text);

// Sets the socket file's permissions.
absl::Status SetSocketMode(const std::string& path, mode_t mode);

// Removes the socket file if it is still the one this process bound (same inode).
void RemoveSocketFile(const std::string& path, ino_t inode);

// The inode of `path` (0 if absent).
ino_t InodeOf(const std::string& path);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_LISTEN_SOCKET_H_
