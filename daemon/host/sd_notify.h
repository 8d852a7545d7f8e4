// systemd's readiness protocol (Type=notify, sd_notify(3)), spoken directly: one datagram of
// "KEY=value" lines to the unix socket named by $NOTIFY_SOCKET ("@name" for an abstract one).
// kcached sends READY=1 once it serves and STOPPING=1 when it starts shutting down, so that
// `systemctl start` returns when the socket answers and units ordered After= it start then.
#ifndef KCACHE_DAEMON_HOST_SD_NOTIFY_H_
#define KCACHE_DAEMON_HOST_SD_NOTIFY_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kcache {

// Sends `state` (e.g. "READY=1\nSTATUS=serving") to $NOTIFY_SOCKET. OK and nothing sent when
// the variable is unset or empty (not started by systemd); an error naming the socket when it
// is set but the datagram cannot be sent.
absl::Status NotifySystemd(absl::string_view state);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_SD_NOTIFY_H_
