// Raw kcache.v1 calls for tests of the daemon's wire behaviour (no client library between):
// a stub on a daemon's address, Resolve read to the end with its chunking recorded, Stat
// counters by name, and wire specs built from source text.
#ifndef KCACHE_TESTS_TESTUTIL_KCACHE_RPC_H_
#define KCACHE_TESTS_TESTUTIL_KCACHE_RPC_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/client_callback.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kcache/v1/kcache.grpc.pb.h"

namespace kcache::testing {

// A stub with default channel arguments (so default message limits: 4 MiB receive).
inline std::unique_ptr<v1::KernelCache::Stub> NewStub(const std::string& address) {
  return v1::KernelCache::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

inline v1::KernelSpec WireSpec(const std::string& name, const std::string& source,
                               std::vector<std::string> options = {}, uint32_t min_arch = 0) {
  v1::KernelSpec spec;
  spec.set_name(name);
  spec.set_source(source);
  for (std::string& option : options) spec.add_options(std::move(option));
  spec.set_min_arch(min_arch);
  return spec;
}

inline v1::ResolveRequest ResolveSpec(const v1::KernelSpec& spec, uint32_t major, uint32_t minor,
                                      uint32_t driver = 13000) {
  v1::ResolveRequest request;
  *request.mutable_spec() = spec;
  request.mutable_device()->set_sm_major(major);
  request.mutable_device()->set_sm_minor(minor);
  request.mutable_device()->set_driver_version(driver);
  request.set_client("test");
  return request;
}

// One Resolve call read to its end.
struct ResolveOutcome {
  grpc::Status status;
  v1::ArtifactHeader header;
  bool header_first = false;  // the first message was the header, and only the first
  std::string bytes;          // the chunks, concatenated
  int chunks = 0;
  size_t largest_chunk = 0;
  int progress = 0;  // ResolveProgress messages (only for a request with want_progress)
  v1::ResolveProgress last_progress;
};

// `on_progress`, when set, sees each ResolveProgress as it comes (the request must ask for them:
// want_progress).
inline ResolveOutcome CallResolve(
    v1::KernelCache::Stub& stub, const v1::ResolveRequest& request,
    std::chrono::seconds deadline = std::chrono::seconds(120),
    const std::function<void(const v1::ResolveProgress&)>& on_progress = {}) {
  ResolveOutcome out;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  std::unique_ptr<grpc::ClientReader<v1::ResolveResponse>> reader = stub.Resolve(&context, request);
  v1::ResolveResponse response;
  int messages = 0;
  bool headers_after_first = false;
  while (reader->Read(&response)) {
    if (response.has_progress()) {
      out.last_progress = response.progress();
      ++out.progress;
      if (on_progress) on_progress(response.progress());
      continue;
    }
    if (response.has_header()) {
      if (messages == 0) {
        out.header = response.header();
      } else {
        headers_after_first = true;
      }
    } else {
      out.bytes += response.chunk();
      out.largest_chunk = std::max(out.largest_chunk, response.chunk().size());
      ++out.chunks;
    }
    if (messages == 0) out.header_first = response.has_header();
    ++messages;
  }
  if (headers_after_first) out.header_first = false;
  out.status = reader->Finish();
  return out;
}

// The Stat counter named `name`, or UINT64_MAX when the daemon has none by that name.
// One Warm call read to its end: the per-job messages, the summary, the final status.
struct WarmOutcome {
  grpc::Status status;
  std::vector<v1::WarmJobDone> jobs;
  std::optional<v1::WarmSummary> summary;
  int after_summary = 0;  // messages that came after the summary (there must be none)
  int failed() const {
    return static_cast<int>(std::count_if(
        jobs.begin(), jobs.end(), [](const auto& job) { return job.outcome() == "failed"; }));
  }
};
inline WarmOutcome CallWarm(v1::KernelCache::Stub& stub, const v1::WarmRequest& request,
                            std::chrono::seconds deadline = std::chrono::seconds(300)) {
  WarmOutcome out;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  std::unique_ptr<grpc::ClientReader<v1::WarmProgress>> reader = stub.Warm(&context, request);
  v1::WarmProgress progress;
  while (reader->Read(&progress)) {
    if (out.summary) ++out.after_summary;
    if (progress.has_job()) out.jobs.push_back(progress.job());
    if (progress.has_summary()) out.summary = progress.summary();
  }
  out.status = reader->Finish();
  return out;
}

inline uint64_t StatCounter(v1::KernelCache::Stub& stub, const std::string& name) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::StatResponse response;
  if (!stub.Stat(&context, v1::StatRequest(), &response).ok()) return UINT64_MAX;
  for (const v1::Counter& counter : response.counters()) {
    if (counter.name() == name) return counter.value();
  }
  return UINT64_MAX;
}

// Asks the server reflection service (grpc.reflection.v1alpha) at `address` to list its
// services and returns the raw answer (a ServerReflectionResponse; service names appear in it
// as plain text), or "" when the call failed. Raw bytes, because Debian ships no
// reflection.proto: the request is list_services (field 7) = "*".
inline std::string ReflectionListServices(const std::string& address) {
  class Lister final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Lister(const std::string& address)
        : stub_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())) {
      static const char kRequest[] = "\x3a\x01*";
      grpc::Slice slice(kRequest, 3);
      request_ = grpc::ByteBuffer(&slice, 1);
      context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      stub_.PrepareBidiStreamingCall(
          &context_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
          grpc::StubOptions(), this);
      StartWrite(&request_);
      StartRead(&response_);
      StartCall();
    }
    void OnWriteDone(bool) override { StartWritesDone(); }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      std::vector<grpc::Slice> slices;
      if (response_.Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices) {
          answer_.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
      }
    }
    void OnDone(const grpc::Status& status) override {
      done_.set_value(status.ok() ? answer_ : "");
    }
    std::string Get() { return done_.get_future().get(); }

   private:
    grpc::GenericStub stub_;
    grpc::ClientContext context_;
    grpc::ByteBuffer request_, response_;
    std::string answer_;
    std::promise<std::string> done_;
  };
  Lister lister(address);
  return lister.Get();
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_KCACHE_RPC_H_
