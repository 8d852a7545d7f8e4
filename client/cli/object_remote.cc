#include "client/cli/object_remote.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/objects/object_wire.h"
#include "kcache/v1/objects.grpc.pb.h"

namespace kcache::cli {
namespace {

// Without a launcher command's budget (the `kcache` commands that list or export objects).
constexpr auto kListDeadline = std::chrono::seconds(5);
constexpr auto kTransferDeadline = std::chrono::seconds(60);

absl::Status FromGrpc(const grpc::Status& status, const std::string& address) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("kcached at ", address, ": ", status.error_message()));
}

// Whether kcached answered a call (whatever it said), as against not being reached in time.
bool Answered(const grpc::Status& status) {
  return status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
         status.error_code() != grpc::StatusCode::UNAVAILABLE;
}

class RemoteObjectCache final : public objects::ObjectCache {
 public:
  RemoteObjectCache(std::string address, std::shared_ptr<launch::CacheBudget> budget,
                    launch::ListedSizes listed)
      : address_(std::move(address)),
        budget_(std::move(budget)),
        stub_(v1::ObjectCache::NewStub(
            grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()))),
        listed_(std::move(listed)) {}

  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override {
    v1::ListObjectsRequest request;
    request.set_key1(std::string(key1.Bytes()));
    absl::StatusOr<std::vector<ObjectEntry>> entries = Call(request);
    if (entries.ok()) listed_.Note(*entries);
    return entries;
  }

  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override {
    std::vector<ObjectEntry> all;
    std::string after;
    do {
      v1::ListObjectsRequest request;
      request.set_all(true);
      request.set_page_after(after);
      std::string asked = after;
      absl::StatusOr<std::vector<ObjectEntry>> entries = Call(request, &after);
      if (!entries.ok()) return entries.status();
      for (ObjectEntry& entry : *entries) all.push_back(std::move(entry));
      if (!after.empty() && after <= asked) {
        return absl::DataLossError("kcached's object listing does not advance: it pages back");
      }
    } while (!after.empty());
    return all;
  }

  absl::StatusOr<objects::ObjectPage> ListClientMade(const std::string& after) override {
    v1::ListObjectsRequest request;
    request.set_all(true);
    request.set_client_made(true);
    request.set_page_after(after);
    objects::ObjectPage page;
    absl::StatusOr<std::vector<ObjectEntry>> entries = Call(request, &page.next_after);
    if (!entries.ok()) return entries.status();
    page.entries = *std::move(entries);
    return page;
  }

  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    std::optional<Timed> timed = Start(listed_.TransferTimeOf(key), kTransferDeadline);
    if (!timed.has_value()) return Refused();
    grpc::ClientContext context;
    context.set_deadline(timed->deadline);
    v1::GetObjectRequest request;
    request.set_key1(std::string(key.command.Bytes()));
    request.set_entry_id(key.entry_id);
    std::unique_ptr<grpc::ClientReader<v1::ObjectChunk>> reader =
        stub_->GetObject(&context, request);
    std::string bytes;
    v1::ObjectChunk chunk;
    uint64_t total = 0;
    while (reader->Read(&chunk)) {
      if (bytes.empty()) total = chunk.total_size();
      if (bytes.size() + chunk.data().size() > total) {
        context.TryCancel();
        return absl::DataLossError(
            absl::StrCat("kcached at ", address_, " sent more than announced"));
      }
      bytes += chunk.data();
    }
    grpc::Status status = reader->Finish();
    Finish(*timed, status);
    if (!status.ok()) return FromGrpc(status, address_);
    if (bytes.size() != total) {
      return absl::DataLossError(
          absl::StrCat("kcached at ", address_, " sent fewer bytes than announced"));
    }
    return bytes;
  }

  absl::Status Put(const ObjectEntry& entry, std::string bundle) override {
    std::optional<Timed> timed = Start(launch::TransferTime(bundle.size()), kTransferDeadline);
    if (!timed.has_value()) return Refused();
    grpc::ClientContext context;
    context.set_deadline(timed->deadline);
    v1::PutObjectResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::PutObjectRequest>> writer =
        stub_->PutObject(&context, &response);
    ObjectEntry sized = entry;
    sized.size = bundle.size();
    size_t offset = 0;
    do {
      v1::PutObjectRequest message;
      if (offset == 0) objects::ToWire(sized, message.mutable_entry());
      size_t size = std::min(objects::kObjectChunkBytes, bundle.size() - offset);
      message.set_data(bundle.substr(offset, size));
      offset += size;
      if (!writer->Write(message)) break;
    } while (offset < bundle.size());
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    Finish(*timed, status);
    return status.ok() ? absl::OkStatus() : FromGrpc(status, address_);
  }

 private:
  // One call's deadline: from the budget when there is one, else `otherwise` from now.
  struct Timed {
    std::chrono::system_clock::time_point deadline;
    launch::CacheBudget::Call call;
  };
  // nullopt when the budget is spent: the call is not made (Refused).
  std::optional<Timed> Start(absl::Duration transfer, std::chrono::seconds otherwise) const {
    if (budget_ == nullptr) return Timed{std::chrono::system_clock::now() + otherwise, {}};
    if (budget_->spent()) return std::nullopt;
    launch::CacheBudget::Call call = budget_->Begin(transfer);
    return Timed{absl::ToChronoTime(call.deadline), call};
  }
  void Finish(const Timed& timed, const grpc::Status& status) {
    if (budget_ != nullptr) budget_->End(timed.call, Answered(status));
  }
  absl::Status Refused() const {
    return absl::DeadlineExceededError(
        absl::StrCat("kcached at ", address_, " not asked: ", budget_->WhySpent()));
  }

  // `next_page`, when given, receives the response's next_page_after.
  absl::StatusOr<std::vector<ObjectEntry>> Call(const v1::ListObjectsRequest& request,
                                                std::string* next_page = nullptr) {
    std::optional<Timed> timed = Start(absl::ZeroDuration(), kListDeadline);
    if (!timed.has_value()) return Refused();
    grpc::ClientContext context;
    context.set_deadline(timed->deadline);
    v1::ListObjectsResponse response;
    grpc::Status status = stub_->ListObjects(&context, request, &response);
    Finish(*timed, status);
    if (!status.ok()) return FromGrpc(status, address_);
    if (next_page != nullptr) *next_page = response.next_page_after();
    std::vector<ObjectEntry> entries;
    for (v1::ObjectEntry& wire : *response.mutable_entries()) {
      absl::StatusOr<ObjectEntry> entry = objects::FromWire(std::move(wire));
      if (entry.ok()) entries.push_back(std::move(*entry));
    }
    return entries;
  }

  const std::string address_;
  const std::shared_ptr<launch::CacheBudget> budget_;  // null: fixed deadlines
  std::unique_ptr<v1::ObjectCache::Stub> stub_;
  launch::ListedSizes listed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<objects::ObjectCache>> OpenRemoteObjectCache(
    const std::string& address, std::shared_ptr<launch::CacheBudget> budget,
    launch::ListedSizes listed) {
  return std::make_unique<RemoteObjectCache>(address, std::move(budget), std::move(listed));
}

}  // namespace kcache::cli
