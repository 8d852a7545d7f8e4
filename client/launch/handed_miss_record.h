// The record kcache-launch hands kcache on a miss (objects::HandedMiss), as bytes: its format,
// bounds and the command it is bound to. handed_miss.h carries it across the exec.
//
// Format (integers little-endian; str = u32 length, then that many bytes):
//   "KCHM"  u32 version (kHandedMissVersion)
//   binding: 32 bytes, BindCommand of the command it was made for
//   str compiler_path
//   u32 n, then n × (str role, str path)         the tools
//   key1: 32 bytes; u32 n, then n × (str name, str value) its fields; str source
//   u8 looked_up (0 or 1)
//   u32 n, then n × str                          the ids listed
//   u32 n, then n × (str id, u64 size)           the entries to fetch
//   checksum: 32 bytes, SHA-256 of every byte before it
// Bounds, checked before anything is allocated: the record at most kMaxHandedMissBytes, a
// string at most kMaxHandedMissString, a count at most kMaxHandedMissItems; nothing may
// follow the checksum. A record outside them, damaged, of another version or for another
// command is refused (DecodeHandedMiss): kcache then makes the key and lists itself, so a
// refused record costs time, never a wrong key. Parsing is bounds-checked throughout: any
// bytes at all give a record or an error.
#ifndef KCACHE_CLIENT_LAUNCH_HANDED_MISS_RECORD_H_
#define KCACHE_CLIENT_LAUNCH_HANDED_MISS_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/sha256.h"
#include "engine/launcher/handed_miss.h"

namespace kcache::launch {

inline constexpr uint32_t kHandedMissVersion = 1;
inline constexpr size_t kMaxHandedMissBytes = size_t{16} << 20;
inline constexpr size_t kMaxHandedMissString = size_t{1} << 20;
inline constexpr uint32_t kMaxHandedMissItems = 1u << 16;

// The variable that names the record's file descriptor (handed_miss.h).
inline constexpr char kHandedMissEnv[] = "KCACHE_HANDED_MISS";

// The command a record is for: SHA-256 over `argv` (the launcher's, argv[0] included), the
// working directory `cwd` and every variable of `env` (NAME=VALUE strings, any order) but
// those the hand-over itself sets or takes away (KCACHE_HANDED_MISS, KCACHE_TIMEOUT_LEFT,
// KCACHE_INSIDE_COMPILE). Each item tagged and length-prefixed.
Sha256Digest BindCommand(const std::vector<std::string>& argv, const std::string& cwd,
                         const std::vector<std::string>& env);

// The record of `miss` for the command `binding`; InvalidArgument when it exceeds a bound (a
// command too large to hand over: kcache then does the full pass).
absl::StatusOr<std::string> EncodeHandedMiss(const objects::HandedMiss& miss,
                                             const Sha256Digest& binding);

// The record in `bytes` when it is whole, of this version, within the bounds and bound to
// `binding`. DataLoss (damaged, truncated, out of bounds), FailedPrecondition (another
// version), PermissionDenied (another command's).
absl::StatusOr<objects::HandedMiss> DecodeHandedMiss(absl::string_view bytes,
                                                     const Sha256Digest& binding);

}  // namespace kcache::launch

#endif  // KCACHE_CLIENT_LAUNCH_HANDED_MISS_RECORD_H_
