#include "engine/workers/worker_protocol.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/coding.h"

namespace kcache {
namespace {

// Waits until `fd` is ready for `events` (or has hung up / failed: the next read or write
// reports that). DeadlineExceeded when `deadline` passes first.
absl::Status WaitReady(int fd, short events, absl::Time deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError("deadline passed while waiting on the worker");
      }
      timeout_ms =
          static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))));
    }
    pollfd p{fd, events, 0};
    int ready = poll(&p, 1, timeout_ms);
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("poll on the worker socket failed: ", std::strerror(errno)));
    }
  }
}

absl::Status WriteAll(int fd, const char* data, size_t size, absl::Time deadline) {
  while (size > 0) {
    if (absl::Status s = WaitReady(fd, POLLOUT, deadline); !s.ok()) return s;
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno == EPIPE || errno == ECONNRESET) {
        return absl::UnavailableError("the other end of the worker socket has gone");
      }
      return absl::InternalError(
          absl::StrCat("write to the worker socket failed: ", std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReadExact(int fd, char* data, size_t size, absl::Time deadline) {
  while (size > 0) {
    if (absl::Status s = WaitReady(fd, POLLIN, deadline); !s.ok()) return s;
    ssize_t n = recv(fd, data, size, MSG_DONTWAIT);
    if (n == 0) return absl::UnavailableError("the other end of the worker socket has gone");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno == ECONNRESET) {
        return absl::UnavailableError("the other end of the worker socket has gone");
      }
      return absl::InternalError(
          absl::StrCat("read from the worker socket failed: ", std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message, absl::Time deadline) {
  size_t size = message.ByteSizeLong();
  if (size > kMaxWorkerFrameBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("a worker message of ", size,
                                                     " bytes is over the ", kMaxWorkerFrameBytes,
                                                     "-byte frame limit"));
  }
  std::string frame(4 + size, '\0');
  EncodeFixed32(frame.data(), static_cast<uint32_t>(size));
  if (!message.SerializeToArray(frame.data() + 4, static_cast<int>(size))) {
    return absl::InternalError("could not serialize a worker message");
  }
  return WriteAll(fd, frame.data(), frame.size(), deadline);
}

absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message, absl::Time deadline) {
  char prefix[4];
  if (absl::Status s = ReadExact(fd, prefix, 4, deadline); !s.ok()) return s;
  uint32_t size = DecodeFixed32(prefix);
  if (size > kMaxWorkerFrameBytes) {
    return absl::DataLossError(absl::StrCat("a worker frame claims ", size,
                                            " bytes, over the limit of ", kMaxWorkerFrameBytes));
  }
  std::string body(size, '\0');
  if (absl::Status s = ReadExact(fd, body.data(), size, deadline); !s.ok()) return s;
  if (!message->ParseFromString(body)) {
    return absl::DataLossError("a worker frame did not parse as the expected message");
  }
  return absl::OkStatus();
}

std::string DescribeJob(const CompileJob& job) {
  return absl::StrCat(job.spec.name.empty() ? "kernel" : job.spec.name, " (", job.id.ShortHex(),
                      ") for ", job.target.ToString());
}

std::string FormatBytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " bytes");
  bool whole = value == static_cast<double>(static_cast<uint64_t>(value));
  return absl::StrFormat("%.*f %s", whole ? 0 : 1, value, kUnits[unit]);
}

internal::WorkerStatus StatusToProto(const absl::Status& status) {
  internal::WorkerStatus proto;
  proto.set_code(static_cast<int32_t>(status.code()));
  proto.set_message(std::string(status.message()));
  status.ForEachPayload([&proto](absl::string_view type_url, const absl::Cord& value) {
    internal::StatusPayload* p = proto.add_payloads();
    p->set_type_url(std::string(type_url));
    p->set_value(std::string(value));
  });
  return proto;
}

absl::Status StatusFromProto(const internal::WorkerStatus& proto) {
  if (proto.code() == 0) return absl::OkStatus();
  absl::Status status(static_cast<absl::StatusCode>(proto.code()), proto.message());
  for (const internal::StatusPayload& p : proto.payloads()) {
    status.SetPayload(p.type_url(), absl::Cord(p.value()));
  }
  return status;
}

internal::CompileRequest JobToProto(const CompileJob& job) {
  internal::CompileRequest proto;
  proto.set_name(job.spec.name);
  proto.set_source_name(job.spec.source_name);
  proto.set_source(job.spec.source);
  for (const auto& [name, content] : job.spec.headers) {
    internal::Header* h = proto.add_headers();
    h->set_name(name);
    h->set_content(content);
  }
  for (const std::string& o : job.spec.options) proto.add_options(o);
  for (const std::string& e : job.spec.name_expressions) proto.add_name_expressions(e);
  proto.set_kernel_id(std::string(job.id.Bytes()));
  proto.set_target(job.target.ToString());
  proto.set_want_ltoir(job.want_ltoir);
  proto.set_ptx(job.ptx);
  return proto;
}

absl::StatusOr<CompileJob> JobFromProto(const internal::CompileRequest& proto) {
  CompileJob job;
  job.spec.name = proto.name();
  job.spec.source_name = proto.source_name();
  job.spec.source = proto.source();
  for (const internal::Header& h : proto.headers()) job.spec.headers[h.name()] = h.content();
  job.spec.options.assign(proto.options().begin(), proto.options().end());
  job.spec.name_expressions.assign(proto.name_expressions().begin(),
                                   proto.name_expressions().end());
  absl::StatusOr<KernelId> id = KernelId::FromBytes(proto.kernel_id());
  if (!id.ok()) return absl::InvalidArgumentError("a worker job carries a malformed kernel id");
  job.id = *id;
  absl::StatusOr<Target> target = ParseTarget(proto.target());
  if (!target.ok()) return target.status();
  job.target = *target;
  job.want_ltoir = proto.want_ltoir();
  job.ptx = proto.ptx();
  return job;
}

void OutputToProto(CompileOutput output, internal::CompileReply* reply) {
  for (Artifact& a : output.artifacts) {
    internal::WorkerArtifact* p = reply->add_artifacts();
    p->set_key(a.meta.key.Encode());
    p->set_kernel_name(a.meta.kernel_name);
    for (const auto& [expr, lowered] : a.meta.lowered_names) {
      internal::LoweredName* n = p->add_lowered_names();
      n->set_expression(expr);
      n->set_lowered(lowered);
    }
    p->set_compile_log(a.meta.compile_log);
    p->set_compile_micros(a.meta.compile_micros);
    p->set_size(a.meta.size);
    p->set_checksum(a.meta.checksum);
    p->set_created_unix_ms(a.meta.created_unix_ms);
    p->set_last_used_unix_ms(a.meta.last_used_unix_ms);
    p->set_min_driver(a.meta.min_driver);
    p->set_bytes(std::move(a.bytes));
  }
}

absl::StatusOr<CompileOutput> OutputFromProto(internal::CompileReply* reply) {
  CompileOutput output;
  for (internal::WorkerArtifact& p : *reply->mutable_artifacts()) {
    Artifact a;
    absl::StatusOr<ArtifactKey> key = ArtifactKey::Decode(p.key());
    if (!key.ok()) {
      return absl::DataLossError(absl::StrCat("a compile worker sent an artifact with a bad key: ",
                                              key.status().message()));
    }
    a.meta.key = *std::move(key);
    a.meta.kernel_name = p.kernel_name();
    for (const internal::LoweredName& n : p.lowered_names()) {
      a.meta.lowered_names.emplace_back(n.expression(), n.lowered());
    }
    a.meta.compile_log = p.compile_log();
    a.meta.compile_micros = p.compile_micros();
    a.meta.size = p.size();
    a.meta.checksum = p.checksum();
    a.meta.created_unix_ms = p.created_unix_ms();
    a.meta.last_used_unix_ms = p.last_used_unix_ms();
    a.meta.min_driver = p.min_driver();
    a.bytes = std::move(*p.mutable_bytes());
    if (a.meta.size != a.bytes.size() || a.meta.checksum != PayloadChecksum(a.bytes)) {
      return absl::DataLossError(absl::StrCat("a compile worker sent ", a.meta.key.ToString(),
                                              " with a size or checksum that does not match"));
    }
    output.artifacts.push_back(std::move(a));
  }
  return output;
}

}  // namespace kcache
