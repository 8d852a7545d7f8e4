#include "daemon/service/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/compat.h"

namespace kcache {
namespace {

grpc::StatusCode CodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return grpc::StatusCode::OK;
    case absl::StatusCode::kCancelled:
      return grpc::StatusCode::CANCELLED;
    case absl::StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case absl::StatusCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case absl::StatusCode::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case absl::StatusCode::kUnauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case absl::StatusCode::kAborted:  // a compile error
      return grpc::StatusCode::ABORTED;
    case absl::StatusCode::kFailedPrecondition:
      return MissReasonOf(status).has_value() ? grpc::StatusCode::UNAVAILABLE
                                              : grpc::StatusCode::FAILED_PRECONDITION;
    case absl::StatusCode::kDeadlineExceeded:   // a compile past its wall-time limit
    case absl::StatusCode::kResourceExhausted:  // ... or its CPU / memory limit
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case absl::StatusCode::kOutOfRange:
      return grpc::StatusCode::OUT_OF_RANGE;
    case absl::StatusCode::kUnimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
    case absl::StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case absl::StatusCode::kDataLoss:
      return grpc::StatusCode::DATA_LOSS;
    case absl::StatusCode::kInternal:
      return grpc::StatusCode::INTERNAL;
    case absl::StatusCode::kUnknown:
    default:
      return grpc::StatusCode::UNKNOWN;
  }
}

// Bytes `c` takes in the grpc-message trailer.
size_t EncodedSize(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return (u < 0x20 || u > 0x7e || c == '%') ? 3 : 1;
}

std::string CutMessage(absl::string_view message) {
  size_t encoded = 0;
  for (char c : message) encoded += EncodedSize(c);
  if (message.size() <= kMaxErrorMessageBytes && encoded <= kMaxEncodedErrorBytes) {
    return std::string(message);
  }
  constexpr size_t kNoteRoom = 200;  // the note, encoded
  encoded = 0;
  size_t keep = 0;
  for (; keep < message.size(); ++keep) {
    encoded += EncodedSize(message[keep]);
    if (keep + 1 > kMaxErrorMessageBytes - kNoteRoom ||
        encoded > kMaxEncodedErrorBytes - kNoteRoom) {
      break;
    }
  }
  // Do not cut a UTF-8 sequence in half: back up to the start of a character.
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xC0) == 0x80) --keep;
  return absl::StrCat(message.substr(0, keep), "\n[... ", message.size() - keep,
                      " more bytes left out to fit gRPC's trailer limit]");
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(CodeFor(status), CutMessage(status.message()));
}

}  // namespace kcache
