#include "core/sha256.h"

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "absl/strings/escaping.h"

namespace kcache {
namespace {

static_assert(sizeof(SHA256_CTX) <= 112 && alignof(SHA256_CTX) <= 8,
              "Sha256::state_ must hold an OpenSSL SHA256_CTX");

SHA256_CTX* Context(unsigned char* state) { return reinterpret_cast<SHA256_CTX*>(state); }

}  // namespace

Sha256::Sha256() { SHA256_Init(Context(state_)); }

void Sha256::Update(absl::string_view data) {
  SHA256_Update(Context(state_), data.data(), data.size());
}

Sha256Digest Sha256::Finish() {
  Sha256Digest digest;
  SHA256_Final(digest.data(), Context(state_));
  return digest;
}

Sha256Digest Sha256Of(absl::string_view data) {
  Sha256 sha;
  sha.Update(data);
  return sha.Finish();
}

std::string DigestHex(const Sha256Digest& digest) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

std::string Sha256Hex(absl::string_view data) { return DigestHex(Sha256Of(data)); }

}  // namespace kcache
