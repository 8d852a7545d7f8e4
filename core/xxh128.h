// XXH3-128, the one way kcache computes it: a digest ~5x faster than SHA-256 here (SHA-NI) that
// is NOT collision-resistant: someone who wants two inputs with one digest can make them.
// Used only where no one gains by doing so:
//  - a process recognising a kernel spec whose id it already knows (core/kernel_spec.h's
//    KernelFingerprint: never a key, never sent);
//  - the content digest of a file in a compiler launcher's key (engine/keys/file_digests.h):
//    the launcher computes the key and the object on the client's side, so whoever can put an
//    object under a key can put any bytes under any key without a collision (the trust rule of
//    docs/torch-extensions.md), and 128 bits are far beyond any accidental collision.
// Names that a daemon trusts from a client, or shares across clients, are SHA-256
// (core/sha256.h).
#ifndef KCACHE_CORE_XXH128_H_
#define KCACHE_CORE_XXH128_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

struct XXH3_state_s;

namespace kcache {

struct Xxh128Digest {
  uint64_t high = 0, low = 0;
  bool operator==(const Xxh128Digest&) const = default;
  std::string Hex() const;  // 32 lowercase hex digits, high half first (xxhsum's spelling)
};

// Streaming: Update any number of times, then Finish once.
class Xxh128 {
 public:
  Xxh128();
  ~Xxh128();
  Xxh128(const Xxh128&) = delete;
  Xxh128& operator=(const Xxh128&) = delete;
  void Update(absl::string_view data);
  Xxh128Digest Finish();

 private:
  XXH3_state_s* state_;
};

Xxh128Digest Xxh128Of(absl::string_view data);
std::string Xxh128Hex(absl::string_view data);  // Xxh128Of(data).Hex()

}  // namespace kcache

#endif  // KCACHE_CORE_XXH128_H_
