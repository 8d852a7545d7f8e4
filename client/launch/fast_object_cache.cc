#include "client/launch/fast_object_cache.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/lib/fast_path.h"
#include "engine/objects/object_wire.h"
#include "kcache/v1/fast_path.pb.h"
#include "kcache/v1/objects.pb.h"

namespace kcache::launch {
namespace {

// A note of a command run uncached is not worth more of the budget than this.
constexpr absl::Duration kNoteCap = absl::Milliseconds(100);

class FastObjectCache final : public objects::ObjectCache {
 public:
  FastObjectCache(std::shared_ptr<client::FastPath> fast, std::shared_ptr<CacheBudget> budget)
      : fast_(std::move(fast)), budget_(std::move(budget)) {}

  absl::StatusOr<std::vector<ObjectEntry>> List(const CommandKey& key1) override {
    v1::FastRequest request;
    request.mutable_list_objects()->set_key1(std::string(key1.Bytes()));
    absl::StatusOr<objects::HeldBytes> bytes = Ask(std::move(request));
    if (!bytes.ok()) return bytes.status();
    v1::ListObjectsResponse listing;
    if (!listing.ParseFromArray(bytes->bytes.data(), static_cast<int>(bytes->bytes.size()))) {
      return absl::DataLossError(
          absl::StrCat("kcached at ", fast_->socket_path(), ": the listing does not parse"));
    }
    std::vector<ObjectEntry> entries;
    for (v1::ObjectEntry& wire : *listing.mutable_entries()) {
      absl::StatusOr<ObjectEntry> entry = objects::FromWire(std::move(wire));
      if (!entry.ok()) return entry.status();
      if (entry->key.command != key1) {
        return absl::DataLossError(
            absl::StrCat("kcached at ", fast_->socket_path(), " listed an entry of another key"));
      }
      entries.push_back(*std::move(entry));
    }
    listed_.Note(entries);
    return entries;
  }

  absl::StatusOr<std::string> Get(const ObjectEntryKey& key) override {
    absl::StatusOr<objects::HeldBytes> held = GetHeld(key);
    if (!held.ok()) return held.status();
    return std::string(held->bytes);
  }

  absl::StatusOr<objects::HeldBytes> GetHeld(const ObjectEntryKey& key) override {
    v1::FastRequest request;
    request.mutable_get_object()->set_key1(std::string(key.command.Bytes()));
    request.mutable_get_object()->set_entry_id(key.entry_id);
    return Ask(std::move(request), listed_.TransferTimeOf(key));
  }

  absl::Status Put(const ObjectEntry&, std::string) override {
    return absl::UnimplementedError("kcache-launch stores nothing: the full kcache does");
  }
  absl::StatusOr<std::vector<ObjectEntry>> ListAll() override {
    return absl::UnimplementedError("listing every entry is gRPC's");
  }

 private:
  // The answer's bytes where they lie in the arena, leased while the owner lives.
  // `transfer`: the TransferTime of the bytes asked for.
  absl::StatusOr<objects::HeldBytes> Ask(v1::FastRequest request,
                                         absl::Duration transfer = absl::ZeroDuration()) {
    if (budget_->spent()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "kcached's fast path at ", fast_->socket_path(), " not asked: ", budget_->WhySpent()));
    }
    CacheBudget::Call call = budget_->Begin(transfer);
    client::FastPath::Viewed answer = fast_->Ask(std::move(request), call.deadline);
    budget_->End(call, answer.has_value());
    if (!answer.has_value()) {
      return absl::UnavailableError(
          absl::StrCat("kcached's fast path at ", fast_->socket_path(), " did not serve it"));
    }
    if (!answer->ok()) return answer->status();
    return objects::HeldBytes{(*answer)->view, std::move((*answer)->owner)};
  }

  std::shared_ptr<client::FastPath> fast_;
  std::shared_ptr<CacheBudget> budget_;
  ListedSizes listed_;
};

}  // namespace

std::unique_ptr<objects::ObjectCache> NewFastObjectCache(std::shared_ptr<client::FastPath> fast,
                                                         std::shared_ptr<CacheBudget> budget) {
  return std::make_unique<FastObjectCache>(std::move(fast), std::move(budget));
}

std::function<void(UncachedReason, absl::string_view)> UncachedNotes(
    std::shared_ptr<client::FastPath> fast, std::shared_ptr<CacheBudget> budget) {
  return [fast = std::move(fast), budget = std::move(budget)](UncachedReason reason,
                                                              absl::string_view option) {
    if (reason == UncachedReason::kNone || budget->spent()) return;
    v1::FastRequest note;
    note.set_note_uncached(static_cast<uint32_t>(reason));
    note.set_note_uncached_option(std::string(option.substr(0, 64)));
    CacheBudget::Call call = budget->Begin(absl::ZeroDuration(), kNoteCap);
    // A note is not answered: sent or not, it only spends time (a lost note is no time-out).
    fast->Tell(note, call.deadline);
    budget->Spend(call);
  };
}

void TellCudaStandInStart(const std::string& server, StandInStart start) {
  if (start == StandInStart::kNotRouted) return;
  std::shared_ptr<client::FastPath> fast = FastPathTo(server);
  if (fast == nullptr) return;
  v1::FastRequest note;
  note.set_note_cuda_stand_in(static_cast<uint32_t>(start));
  fast->Tell(note, absl::Now() + kNoteCap);
}

std::shared_ptr<client::FastPath> FastPathTo(const std::string& server) {
  std::string socket = client::FastSocketFor(server);
  std::error_code ec;
  if (socket.empty() || !std::filesystem::exists(socket, ec)) return nullptr;
  return std::make_shared<client::FastPath>(socket);
}

}  // namespace kcache::launch
