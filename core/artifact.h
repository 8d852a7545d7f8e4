// Artifacts (compiled bytes plus metadata) and the keys they are stored under.
#ifndef KCACHE_CORE_ARTIFACT_H_
#define KCACHE_CORE_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache {

// Numbered and stable: stored in keys and sent on the wire. kObject is not a kernel's
// artifact: an object entry (core/object_entry.h), laid out on these fields by
// engine/objects/object_schema.h alone, with no target (encoded as an empty string). It
// never travels in Resolve answers and kernel listings leave it out.
enum class ArtifactKind : uint8_t { kCubin = 1, kPtx = 2, kLtoir = 3, kObject = 4 };
absl::string_view ArtifactKindName(ArtifactKind kind);  // "cubin", "ptx", "ltoir", "object"
absl::StatusOr<ArtifactKind> ParseArtifactKind(absl::string_view name);

// Identifies one artifact. Encode() lays fields out so that every artifact of one kernel
// shares the prefix KernelPrefix(id) (a RocksDB prefix scan finds them all):
//   kernel id (32 raw bytes) | kind (1 byte) | u8 len + target string | u8 len + toolkit id
//   | u32be driver
// `driver` is 0 for artifacts the daemon built (NVRTC/nvJitLink output); only artifacts the
// driver itself produced (PTX JIT results uploaded by a worker) carry a driver version.
struct ArtifactKey {
  KernelId kernel_id;
  ArtifactKind kind = ArtifactKind::kCubin;
  Target target;
  std::string toolkit;  // ToolkitIdentity::id, e.g. "nvrtc-13.0+1a2b3c4d5e6f"
  uint32_t driver = 0;

  std::string Encode() const;
  static absl::StatusOr<ArtifactKey> Decode(absl::string_view encoded);
  static std::string KernelPrefix(const KernelId& id) { return std::string(id.Bytes()); }
  std::string ToString() const;  // "3fa2c1d9e0b4/cubin/sm_89/nvrtc-13.0+..."
  auto operator<=>(const ArtifactKey&) const = default;
};

struct ArtifactMeta {
  ArtifactKey key;
  std::string kernel_name;  // display name of the kernel it was built from
  // name expression -> lowered (mangled) name, as NVRTC reported them.
  std::vector<std::pair<std::string, std::string>> lowered_names;
  std::string compile_log;      // NVRTC/nvJitLink log (warnings), may be empty
  uint64_t compile_micros = 0;  // wall time of the compile that produced it
  uint64_t size = 0;            // payload bytes
  uint64_t checksum = 0;        // XXH3-64 of the payload
  int64_t created_unix_ms = 0;
  int64_t last_used_unix_ms = 0;
  uint32_t min_driver = 0;  // oldest driver (CUDA version number, e.g. 13000) that loads it
  // Who stored it, in words, as the kcached that took it saw them ("uid 1000 pid 42 via kcached
  // on node-a"); "" when not recorded (kernels kcached compiled itself, older stores).
  std::string put_by;
};

struct Artifact {
  ArtifactMeta meta;
  std::string bytes;
};

// Drivers are CUDA version numbers as cuDriverGetVersion reports them: 13000 is 13.0, 12080
// 12.8; 0 means unknown. "12.8", or "unknown" for 0.
std::string DriverText(uint32_t driver);

// The oldest driver that loads an artifact of `kind` built by a toolkit of version
// major.minor: a cubin or LTO-IR needs a driver of the same major or newer (CUDA minor-version
// compatibility: 13.x output loads on any 13.x driver), PTX one that knows its ISA version,
// i.e. the toolkit's own version or newer.
uint32_t MinDriverFor(ArtifactKind kind, int toolkit_major, int toolkit_minor);

// XXH3-64 of `data`: the checksum stored with every artifact and checked on every read.
uint64_t PayloadChecksum(absl::string_view data);

// The artifact's key and checksum as one string: names exactly these bytes (another content
// under the same key gets another name). For the daemon's arena slots and write-behind queue.
std::string KeyWithChecksum(const ArtifactMeta& meta);

// Milliseconds since the Unix epoch, for created/last-used times.
int64_t NowUnixMillis();

}  // namespace kcache

#endif  // KCACHE_CORE_ARTIFACT_H_
