// Whole-file reads and atomic writes, for the small files the tools read and write whole: a
// baked manifest, a launcher's outputs and the compiler's dependency file, the digest memo;
// and reads at an offset, for the large ones read a piece at a time.
#ifndef KCACHE_CORE_FILE_IO_H_
#define KCACHE_CORE_FILE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kcache {

// The whole of `path`, read at its size in one pass. NotFound when it does not exist;
// FailedPrecondition when it cannot be read whole (not a regular file, no permission, a short
// read). The message names the path and the cause.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Writes `bytes` to a temporary file beside `path` (its name holds this process's id) and
// renames it over `path`: a reader, or another writer, sees the old file or the new one,
// never part of one. PermissionDenied naming the file and the cause when either step fails;
// the temporary file is then removed.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);

// Everything `fd` (a pipe, standard input) gives until its end, read in pieces (again after
// EINTR). ResourceExhausted as soon as it passes `max_bytes`, nothing more read; Internal when a
// read fails, naming the cause; DeadlineExceeded when its end has not come by `deadline` (each
// read waits for it with poll; the default waits as long as the writer takes).
absl::StatusOr<std::string> ReadToEnd(int fd, uint64_t max_bytes,
                                      absl::Time deadline = absl::InfiniteFuture());

// Writes all of `bytes` to `fd` (a pipe, standard output), again after EINTR and a short write.
// Internal naming the cause when a write fails.
absl::Status WriteFull(int fd, absl::string_view bytes);

// Reads up to `length` bytes of `fd` at `offset` into `into` (pread, again after EINTR and a
// short read): the count read, less than `length` only at the file's end or on an error.
size_t PreadFull(int fd, uint64_t offset, char* into, size_t length);

}  // namespace kcache

#endif  // KCACHE_CORE_FILE_IO_H_
