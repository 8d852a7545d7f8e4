#include "core/xxh128.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t as a complete type
#include <xxhash.h>

#include "absl/strings/str_format.h"

namespace kcache {

std::string Xxh128Digest::Hex() const { return absl::StrFormat("%016x%016x", high, low); }

Xxh128::Xxh128() : state_(new XXH3_state_t) { XXH3_128bits_reset(state_); }

Xxh128::~Xxh128() { delete state_; }

void Xxh128::Update(absl::string_view data) {
  XXH3_128bits_update(state_, data.data(), data.size());
}

Xxh128Digest Xxh128::Finish() {
  XXH128_hash_t hash = XXH3_128bits_digest(state_);
  return Xxh128Digest{hash.high64, hash.low64};
}

Xxh128Digest Xxh128Of(absl::string_view data) {
  XXH128_hash_t hash = XXH3_128bits(data.data(), data.size());
  return Xxh128Digest{hash.high64, hash.low64};
}

std::string Xxh128Hex(absl::string_view data) { return Xxh128Of(data).Hex(); }

}  // namespace kcache
