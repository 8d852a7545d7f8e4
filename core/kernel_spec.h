// KernelSpec: what a kernel is made of, and the kernel id that names it by content.
#ifndef KCACHE_CORE_KERNEL_SPEC_H_
#define KCACHE_CORE_KERNEL_SPEC_H_

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache {

// Version of the framing hashed into a kernel id (docs/kernel-id.md). Bumping it changes
// every id, so it changes only with the framing itself.
inline constexpr uint32_t kKernelIdSchemaVersion = 1;

// Everything that goes into compiling one kernel. Paths, mtimes, environment and framework
// version strings are deliberately absent: two specs with the same content are the same kernel.
struct KernelSpec {
  std::string name;                            // display name; NOT part of the kernel id
  std::string source;                          // CUDA C++ source text
  std::map<std::string, std::string> headers;  // include name -> content (kept sorted by name)
  std::vector<std::string> options;            // NVRTC options, in order (never -arch)
  std::vector<std::string> name_expressions;   // e.g. "softmax<float>", in order
  // The source's file name as the manifest or the sender gives it ("broken.cu"), for NVRTC's
  // messages only: a compile log names it instead of the program's content-derived name. NOT
  // part of the kernel id, and never in the compiled bytes.
  std::string source_name;
};

// SHA-256 of a KernelSpec's canonical framing.
class KernelId {
 public:
  static constexpr size_t kSize = 32;
  KernelId() = default;
  explicit KernelId(const std::array<uint8_t, kSize>& bytes) : bytes_(bytes) {}

  // Parses 64 lowercase or uppercase hex digits.
  static absl::StatusOr<KernelId> FromHex(absl::string_view hex);
  // Takes exactly kSize raw bytes.
  static absl::StatusOr<KernelId> FromBytes(absl::string_view raw);

  std::string Hex() const;       // 64 lowercase hex digits
  std::string ShortHex() const;  // first 12 hex digits, for display
  absl::string_view Bytes() const {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }
  auto operator<=>(const KernelId&) const = default;

 private:
  std::array<uint8_t, kSize> bytes_{};
};

// The exact bytes that are hashed (exposed for the test vectors in docs/kernel-id.md):
//   "kcache.kernel\0" u32le(schema version)
//   'S' field(source)
//   for each header sorted by name:  'H' field(name) field(content)
//   for each option in order:        'O' field(option)
//   for each name expression:        'N' field(expression)
//   'E'
// where field(x) = u64le(byte length of x) followed by the bytes of x.
std::string CanonicalKernelFraming(const KernelSpec& spec);

KernelId ComputeKernelId(const KernelSpec& spec);
// How many times this process has run ComputeKernelId (SHA-256 over a whole spec: its cost
// grows with the headers). Tests count it per request: a request is hashed once, at its edge.
uint64_t KernelIdsComputed();

// XXH3-128 (core/xxh128.h) of CanonicalKernelFraming(spec): a fast digest of exactly
// what the kernel id covers, for a process to recognise a spec whose id it already knows
// (client/lib/known_kernel_ids.h). Not collision-resistant: never a key, never sent, never
// trusted across processes; only ComputeKernelId names a kernel.
struct KernelFingerprint {
  uint64_t high = 0, low = 0;
  bool operator==(const KernelFingerprint&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const KernelFingerprint& f) {
    return H::combine(std::move(h), f.high, f.low);
  }
};
KernelFingerprint FingerprintKernel(const KernelSpec& spec);

// What a kernel spec may hold, wherever it comes from (a manifest, a worker's request on the
// wire, libkcache before it sends one). gRPC refuses any message over 4 MiB before the daemon
// sees it; these limits sit below that so that a large but well-formed spec gets a precise
// answer.
inline constexpr size_t kMaxSpecBytes = 3u << 20;  // source + headers + options + exprs
inline constexpr size_t kMaxSpecHeaders = 1024;
inline constexpr size_t kMaxSpecOptions = 256;
inline constexpr size_t kMaxNameExpressions = 4096;
inline constexpr size_t kMaxShortField = 4096;  // one option, expression, header name
inline constexpr size_t kMaxKernelNameBytes = 256;
inline constexpr size_t kMaxSourceNameBytes = 255;

// OK when `spec` is within those limits: non-empty source; sizes and counts within the
// limits; no NUL byte in any text (NVRTC reads C strings); header names non-empty; the name,
// source_name, header names, options and name expressions UTF-8 (protobuf strings on the wire;
// sources and header contents may hold any bytes but NUL). Otherwise
// InvalidArgument "<field>...: <what was wrong and what to send>". Options are
// ValidateCompileOptions' (core/compile_options.h), arch ranges ValidateArchRange's
// (core/target.h).
absl::Status ValidateSpecLimits(const KernelSpec& spec, absl::string_view field);

// The length of the longest prefix of `text` that is UTF-8 (strict: no overlong forms, no
// surrogates, nothing past U+10FFFF); text.size() when all of it is.
size_t Utf8ValidPrefix(absl::string_view text);

// Lowest and highest SM (major*10+minor, e.g. 75, 121) a kernel supports; 0 = no bound.
struct ArchRange {
  int min_arch = 0;
  int max_arch = 0;
  bool Contains(int arch) const {
    return (min_arch == 0 || arch >= min_arch) && (max_arch == 0 || arch <= max_arch);
  }
};

// A kernel as the store knows it: its spec (so a miss can be compiled later), its id, and
// what the manifest declared about it.
struct KernelRecord {
  KernelId id;
  KernelSpec spec;
  ArchRange arch;
  bool want_ltoir = false;
  int64_t registered_unix_ms = 0;  // when it was last written (a newer warm of the same name wins)
};

}  // namespace kcache

#endif  // KCACHE_CORE_KERNEL_SPEC_H_
