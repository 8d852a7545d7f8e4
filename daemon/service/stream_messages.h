// Raw messages of the calls kcached serves as ByteBuffers (Resolve, ResolveMany): the request
// parsed, answers serialized, and an artifact's bytes as chunk messages that share it.
#ifndef KCACHE_DAEMON_SERVICE_STREAM_MESSAGES_H_
#define KCACHE_DAEMON_SERVICE_STREAM_MESSAGES_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/artifact.h"

namespace kcache {

// Parses `raw` as a `Request`; InvalidArgument naming the message when it does not parse.
// `raw` is left as it was (its slices are shared, not copied).
template <typename Request>
absl::Status ParseRawRequest(const grpc::ByteBuffer& raw, Request* request) {
  grpc::ByteBuffer copy(raw);  // Deserialize consumes its buffer
  if (grpc::SerializationTraits<Request>::Deserialize(&copy, request).ok()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("the request does not parse as a ",
                                                 Request::descriptor()->full_name(),
                                                 "; build it from proto/kcache/v1/kcache.proto"));
}

// `message` serialized, as gRPC would send it.
template <typename Message>
grpc::ByteBuffer RawMessage(const Message& message) {
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<Message>::Serialize(message, &buffer, &own);
  return buffer;
}

// `artifact`'s bytes as messages of at most kChunkBytes of them each, in order (none for no
// bytes). Each message is `prefix` (the serialized fields that come before the chunk; empty for
// none) then field `chunk_field` (bytes) holding the chunk: the framing is copied, the bytes
// are not; each chunk is a slice that holds a reference to `artifact` until gRPC has sent it.
std::vector<grpc::ByteBuffer> ChunkMessages(const std::shared_ptr<const Artifact>& artifact,
                                            const std::string& prefix, int chunk_field);

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_STREAM_MESSAGES_H_
