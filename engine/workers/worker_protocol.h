// The daemon <-> compile worker protocol (proto/kcache/internal/worker.proto): length-prefixed
// frames over a socket, and conversions between the Compiler types and their messages.
// Shared by the process pool (process_pool.cc, worker_process.cc) and the worker binary
// (worker_main.cc). Everything here is stateless and thread-safe.
#ifndef KCACHE_ENGINE_WORKERS_WORKER_PROTOCOL_H_
#define KCACHE_ENGINE_WORKERS_WORKER_PROTOCOL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/compile/compiler.h"
#include "kcache/internal/worker.pb.h"

namespace kcache {

// Bumped whenever worker.proto or its meaning changes; a worker that says another number is
// refused (it comes from another build).
inline constexpr uint32_t kWorkerProtocolVersion = 3;

// The socket a worker talks on: the pool puts its end of the socketpair at this descriptor.
inline constexpr int kWorkerSocketFd = 3;

// Exit codes of a worker that stops on its own.
inline constexpr int kWorkerExitBadArguments = 2;  // bad command line
inline constexpr int kWorkerExitOutOfMemory = 86;  // an allocation failed (memory limit)
inline constexpr int kWorkerExitExecFailed = 127;  // the pool's child could not exec it

// A frame bigger than this is refused by both ends (artifacts are a few MiB at most).
inline constexpr uint32_t kMaxWorkerFrameBytes = 1u << 30;

// Writes `message` as one frame: u32le length, then the bytes. Waits at most until
// `deadline` (absl::InfiniteFuture() to block). Never raises SIGPIPE.
// DeadlineExceeded at the deadline; Unavailable when the peer has gone; Internal otherwise.
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message, absl::Time deadline);

// Reads one frame into `message`. Unavailable when the peer closed the socket (cleanly, at
// a frame boundary or not); DeadlineExceeded at the deadline; DataLoss for an oversized or
// unparsable frame.
absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message, absl::Time deadline);

// "saxpy (3fa2c1d9e0b4) for sm_89": a job as error messages name it.
std::string DescribeJob(const CompileJob& job);

// "4 GiB", "300 MiB", "1.5 GiB", "17 bytes": limits as messages show them.
std::string FormatBytes(uint64_t bytes);

// Status <-> message, payloads included (the compile log travels as kCompileLogPayload).
internal::WorkerStatus StatusToProto(const absl::Status& status);
absl::Status StatusFromProto(const internal::WorkerStatus& proto);

internal::CompileRequest JobToProto(const CompileJob& job);
// InvalidArgument when the kernel id or the target does not decode.
absl::StatusOr<CompileJob> JobFromProto(const internal::CompileRequest& proto);

// Moves the artifacts' bytes into the reply.
void OutputToProto(CompileOutput output, internal::CompileReply* reply);
// DataLoss when an artifact's key does not decode or its checksum does not match its bytes.
absl::StatusOr<CompileOutput> OutputFromProto(internal::CompileReply* reply);

}  // namespace kcache

#endif  // KCACHE_ENGINE_WORKERS_WORKER_PROTOCOL_H_
