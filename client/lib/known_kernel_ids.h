// The kernel ids this process already knows, so that asking the daemon for a kernel by source
// (client.cc, AskById) does not hash its 10-100 KB of source and headers with SHA-256 on every
// call: the ids a baked manifest brought with its kernels (LoadManifestKernels), and the ones
// computed here before. A spec is recognised by its FingerprintKernel (XXH3-128 of the same
// framing the id hashes, ~10x faster), computed from the spec in hand each time: a source
// changed after it was loaded is a new fingerprint, so its id is computed, never looked up.
// Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_KNOWN_KERNEL_IDS_H_
#define KCACHE_CLIENT_LIB_KNOWN_KERNEL_IDS_H_

#include "core/kernel_spec.h"

namespace kcache::client {

// Remembers `id` as the kernel id of `spec`. The caller vouches for it: `id` is
// ComputeKernelId(spec), as `kcache bake-manifest` wrote it beside the spec. At most
// kMaxKnownKernelIds are kept (the oldest are forgotten past that). Thread-safe.
void RememberKernelId(const KernelSpec& spec, const KernelId& id);

// ComputeKernelId(spec), from what was remembered when the fingerprint matches, else computed
// and remembered. Thread-safe.
KernelId KnownKernelId(const KernelSpec& spec);

inline constexpr size_t kMaxKnownKernelIds = 4096;

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_KNOWN_KERNEL_IDS_H_
