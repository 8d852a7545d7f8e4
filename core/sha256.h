// SHA-256, the one way kcache computes it (kernel ids, the launchers' keys, toolkit identities,
// shared-tier key ids: names a daemon trusts or shares; files' content digests in a launcher's
// key are XXH3-128, core/xxh128.h says why).
//
// OpenSSL's low-level SHA-256 functions, not its one-shot SHA256() or EVP_Digest: in OpenSSL 3
// those fetch the digest from a provider and, on a process's first call, load OpenSSL's
// configuration and object names, ~1 ms of a short-lived process (a compiler launcher's hit,
// a worker's start). Same digest.
#ifndef KCACHE_CORE_SHA256_H_
#define KCACHE_CORE_SHA256_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kcache {

using Sha256Digest = std::array<uint8_t, 32>;

// Streaming: Update any number of times, then Finish once.
class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view data);
  Sha256Digest Finish();

 private:
  alignas(8) unsigned char state_[112];  // an OpenSSL SHA256_CTX (checked in sha256.cc)
};

Sha256Digest Sha256Of(absl::string_view data);
std::string DigestHex(const Sha256Digest& digest);  // 64 lowercase hex digits
std::string Sha256Hex(absl::string_view data);      // DigestHex(Sha256Of(data))

}  // namespace kcache

#endif  // KCACHE_CORE_SHA256_H_
