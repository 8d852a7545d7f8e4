// Raw messages of the calls kcached serves as ByteBuffers: the chunks of an artifact.
#include "daemon/service/stream_messages.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <cstdint>

#include "daemon/service/request_limits.h"

namespace kcache {
namespace {

using ::google::protobuf::internal::WireFormatLite;

// `prefix`, then field `chunk_field` = artifact bytes [offset, offset + n).
grpc::ByteBuffer ChunkMessage(const std::shared_ptr<const Artifact>& artifact,
                              const std::string& prefix, int chunk_field, size_t offset, size_t n) {
  using ::google::protobuf::io::CodedOutputStream;
  uint8_t framing[16];
  uint8_t* end = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(chunk_field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), framing);
  end = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(n), end);
  std::string head = prefix;
  head.append(reinterpret_cast<const char*>(framing), static_cast<size_t>(end - framing));
  auto* owner = new std::shared_ptr<const Artifact>(artifact);
  grpc::Slice slices[2] = {
      grpc::Slice(head),
      grpc::Slice(
          const_cast<char*>(artifact->bytes.data() + offset), n,
          [](void* p) { delete static_cast<std::shared_ptr<const Artifact>*>(p); }, owner)};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace

std::vector<grpc::ByteBuffer> ChunkMessages(const std::shared_ptr<const Artifact>& artifact,
                                            const std::string& prefix, int chunk_field) {
  std::vector<grpc::ByteBuffer> messages;
  size_t size = artifact->bytes.size();
  messages.reserve((size + kChunkBytes - 1) / kChunkBytes);
  for (size_t offset = 0; offset < size; offset += kChunkBytes) {
    messages.push_back(
        ChunkMessage(artifact, prefix, chunk_field, offset, std::min(kChunkBytes, size - offset)));
  }
  return messages;
}

}  // namespace kcache
