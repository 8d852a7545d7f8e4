// Conversions between libkcache's public types and kcache_core's, and the checks both the
// local compiler and the client apply before compiling. Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_API_CONVERT_H_
#define KCACHE_CLIENT_LIB_API_CONVERT_H_

#include "absl/status/status.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "kcache/kcache.h"

namespace kcache::client {

KernelSpec ToCoreSpec(const KernelSource& source);
ArtifactKind FromCoreKind(::kcache::ArtifactKind kind);
::kcache::ArtifactKind ToCoreKind(ArtifactKind kind);
// Everything but served_from, rule, reason, needs_jit and micros.
FetchedKernel FromCoreArtifact(Artifact artifact);

// InvalidArgument unless the device's SM looks like one (major 1..99, minor 0..9).
absl::Status CheckDevice(const Device& device);
// NotFound when the device is outside the source's declared min/max arch.
absl::Status CheckArchRange(const KernelSource& source, const Device& device);

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_API_CONVERT_H_
