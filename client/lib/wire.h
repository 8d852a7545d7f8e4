// Conversions between libkcache's public types and the wire (kcache.proto), and the mapping
// of gRPC statuses to absl statuses. Internal: the only client code besides daemon_rpc.cc that
// sees protobuf types.
#ifndef KCACHE_CLIENT_LIB_WIRE_H_
#define KCACHE_CLIENT_LIB_WIRE_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kcache/kcache.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache::client {

void ToWire(const KernelSource& source, v1::KernelSpec* out);
void ToWire(const Device& device, v1::Device* out);

// Fills everything but `bytes` and `micros` from a Resolve header.
FetchedKernel FromWireHeader(const v1::ArtifactHeader& header);
ArtifactKind FromWire(v1::ArtifactKind kind);
ServedFrom FromWire(v1::Tier tier);
ServeRule FromWire(v1::ServeRule rule);
// The progress of the call's entry `index`.
CompileProgress FromWire(const v1::ResolveProgress& progress, size_t index);

// gRPC and absl share the canonical code numbers; the daemon's message is kept.
absl::Status FromGrpc(const grpc::Status& status);

// True when `status` says the daemon could not answer (unreachable, slow, broken, not a
// kcached) rather than answering: UNAVAILABLE, DEADLINE_EXCEEDED, DATA_LOSS, INTERNAL,
// UNKNOWN, UNIMPLEMENTED, CANCELLED. These count against the circuit breaker and allow a
// local compile. NOT_FOUND, INVALID_ARGUMENT, ABORTED, ... are the daemon's answers.
bool IsDaemonFailure(const absl::Status& status);

// The address as gRPC takes it: a bare absolute path becomes "unix:<path>".
std::string GrpcTarget(const std::string& address);

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_WIRE_H_
