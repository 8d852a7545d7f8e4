// The one place where absl::Status becomes grpc::Status (docs/protocol.md, "Status codes").
#ifndef KCACHE_DAEMON_SERVICE_GRPC_STATUS_H_
#define KCACHE_DAEMON_SERVICE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <cstddef>

#include "absl/status/status.h"

namespace kcache {

// Longest error message sent to a client: at most this many bytes, and at most
// kMaxEncodedErrorBytes once gRPC percent-encodes it (every byte outside printable ASCII, and
// '%', takes 3). gRPC carries the message in a trailer and a client refuses trailers over its
// metadata limit (8 KiB by default: the call then fails with RESOURCE_EXHAUSTED "received
// metadata size exceeds limit" and the message is lost), so a longer message (a compile
// error's NVRTC log) is cut here, with a note saying how much was left out.
inline constexpr size_t kMaxErrorMessageBytes = 4096;
inline constexpr size_t kMaxEncodedErrorBytes = 6144;

// Maps a status from the artifact cache (or the front end's own validation) to the code a
// client sees (docs/protocol.md, "Status codes"):
//   OK                  -> OK
//   InvalidArgument     -> INVALID_ARGUMENT     the request is malformed or refused
//   NotFound            -> NOT_FOUND            nothing servable: kernel unknown, below the
//                                               kernel's min arch, no toolkit, no_compile
//   Aborted             -> ABORTED              the compile failed; the NVRTC log is in the
//                                               message. Deterministic: do not retry (the
//                                               same code an in-process compile returns)
//   FailedPrecondition  -> FAILED_PRECONDITION  e.g. Warm on a daemon with no toolkit;
//                          UNAVAILABLE when it carries a miss reason (a Resolve whose compile
//                          could not run: no compile worker could start), so clients fail open
//   DeadlineExceeded / ResourceExhausted (a compile ran past its wall, CPU or memory limit)
//                       -> RESOURCE_EXHAUSTED   so that a client never confuses it with its
//                                               own deadline
//   Unavailable         -> UNAVAILABLE          every tier failed; retry later
//   Internal            -> INTERNAL             e.g. a compile worker crashed
//   anything else       -> the code of the same name
// The message is kept, cut to the limits above.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_GRPC_STATUS_H_
