#include "daemon/service/object_cache_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/service/grpc_status.h"
#include "engine/objects/object_page.h"
#include "engine/objects/object_wire.h"

namespace kcache {
namespace {

grpc::Status Invalid(absl::string_view message) {
  return ToGrpcStatus(absl::InvalidArgumentError(message));
}

// The entry ids of a launcher's lookup that AwaitCompile reads, and their longest length.
constexpr int kMaxSeenEntryIds = 64;
constexpr size_t kEntryIdLength = 64;

// One AwaitCompile call as the launchers' turns see it.
class StreamTurnCall final : public objects::TurnCall {
 public:
  using Stream = grpc::ServerReaderWriter<v1::AwaitCompileUpdate, v1::AwaitCompileRequest>;
  StreamTurnCall(grpc::ServerContext* context, Stream* stream)
      : context_(context), stream_(stream) {}

  bool Send(const objects::TurnUpdate& update) override {
    v1::AwaitCompileUpdate wire;
    switch (update.kind) {
      case objects::TurnUpdate::Kind::kCompile:
        wire.set_kind(v1::AwaitCompileUpdate::KIND_COMPILE);
        wire.set_holds_turn(update.holds);
        break;
      case objects::TurnUpdate::Kind::kWait:
        wire.set_kind(v1::AwaitCompileUpdate::KIND_WAIT);
        wire.set_wait_limit_seconds(
            static_cast<uint32_t>(std::max<int64_t>(0, absl::ToInt64Seconds(update.limit))));
        break;
      case objects::TurnUpdate::Kind::kArrived:
        wire.set_kind(v1::AwaitCompileUpdate::KIND_ARRIVED);
        break;
    }
    wire.set_holder(update.holder);
    wire.set_why(update.why);
    return stream_->Write(wire);
  }

  bool Gone() override { return context_->IsCancelled(); }

  std::optional<objects::TurnEnd> Receive() override {
    v1::AwaitCompileRequest message;
    if (!stream_->Read(&message)) return std::nullopt;
    objects::TurnEnd end;
    switch (message.end()) {
      case v1::TURN_END_STORED:
        end.kind = objects::TurnEnd::Kind::kStored;
        break;
      case v1::TURN_END_SERVED:
        end.kind = objects::TurnEnd::Kind::kServed;
        break;
      case v1::TURN_END_NOT_SERVED:
        end.kind = objects::TurnEnd::Kind::kNotServed;
        break;
      default:  // NOT_STORED, or a message that says nothing: not stored
        end.kind = objects::TurnEnd::Kind::kNotStored;
        break;
    }
    end.why = message.why();
    return end;
  }

 private:
  grpc::ServerContext* context_;
  Stream* stream_;
};

}  // namespace

absl::Status ListObjectsByKey(objects::ObjectCache& cache, const v1::ListObjectsRequest& request,
                              v1::ListObjectsResponse* response) {
  absl::StatusOr<CommandKey> key1 = CommandKey::FromBytes(request.key1());
  if (!key1.ok()) return absl::InvalidArgumentError("ListObjects: key1 is not 32 bytes");
  absl::StatusOr<std::vector<ObjectEntry>> entries = cache.List(*key1);
  if (!entries.ok()) return entries.status();
  for (const ObjectEntry& entry : *entries) {
    objects::ToWire(entry, response->add_entries());
  }
  return absl::OkStatus();
}

namespace {

// The entry `request` names (InvalidArgument for a malformed key1 or entry_id).
absl::StatusOr<ObjectEntryKey> KeyOf(const v1::GetObjectRequest& request) {
  v1::ObjectEntry wire;
  wire.set_key1(request.key1());
  wire.set_entry_id(request.entry_id());
  absl::StatusOr<ObjectEntry> entry = objects::FromWire(std::move(wire));
  if (!entry.ok()) return entry.status();
  return entry->key;
}

}  // namespace

absl::StatusOr<std::string> GetObjectBytes(objects::ObjectCache& cache,
                                           const v1::GetObjectRequest& request) {
  absl::StatusOr<ObjectEntryKey> key = KeyOf(request);
  if (!key.ok()) return key.status();
  return cache.Get(*key);
}

void RecordObjectUse(objects::ObjectCache& cache, const v1::GetObjectRequest& request) {
  if (absl::StatusOr<ObjectEntryKey> key = KeyOf(request); key.ok()) cache.RecordUse(*key);
}

grpc::Status ObjectCacheService::ListObjects(grpc::ServerContext*,
                                             const v1::ListObjectsRequest* request,
                                             v1::ListObjectsResponse* response) {
  absl::StatusOr<std::vector<ObjectEntry>> entries;
  if (request->all() && request->client_made()) {
    absl::StatusOr<objects::ObjectPage> page = cache_->ListClientMade(request->page_after());
    if (!page.ok()) return ToGrpcStatus(page.status());
    response->set_next_page_after(page->next_after);
    entries = std::move(page->entries);
  } else if (request->all()) {
    absl::StatusOr<std::vector<ObjectEntry>> all = cache_->ListAll();
    if (!all.ok()) return ToGrpcStatus(all.status());
    objects::ObjectPage page =
        objects::PageOfEntries(*std::move(all), request->page_after(), objects::kObjectPageBytes);
    response->set_next_page_after(page.next_after);
    entries = std::move(page.entries);
  } else {
    counts_->Add(Statistic::kObjectLookups);
    return ToGrpcStatus(ListObjectsByKey(*cache_, *request, response));
  }
  if (!entries.ok()) return ToGrpcStatus(entries.status());
  // An entry over --object-entry-max-bytes (stored before that bound: the Redis door once took
  // keys of any length) is left out, so that a page stays far below gRPC's 4 MiB message limit
  // whatever the store holds; it is still served by key.
  uint64_t skipped = 0;
  for (const ObjectEntry& entry : *entries) {
    v1::ObjectEntry* wire = response->add_entries();
    objects::ToWire(entry, wire);
    if (wire->ByteSizeLong() > limits_.max_entry_bytes) {
      response->mutable_entries()->RemoveLast();
      ++skipped;
    }
  }
  if (skipped > 0) {
    counts_->Add(Statistic::kObjectListingSkipped, skipped);
    spdlog::warn(
        "object listing: left out {} entries whose metadata is over --object-entry-max-bytes {} "
        "(stored before that bound); they cannot be exported",
        skipped, limits_.max_entry_bytes);
  }
  return grpc::Status::OK;
}

grpc::Status ObjectCacheService::GetObject(grpc::ServerContext*,
                                           const v1::GetObjectRequest* request,
                                           grpc::ServerWriter<v1::ObjectChunk>* writer) {
  absl::StatusOr<std::string> bytes = GetObjectBytes(*cache_, *request);
  if (!bytes.ok()) return ToGrpcStatus(bytes.status());
  counts_->Add(Statistic::kObjectsServed);
  size_t offset = 0;
  do {
    v1::ObjectChunk chunk;
    if (offset == 0) chunk.set_total_size(bytes->size());
    size_t size = std::min(objects::kObjectChunkBytes, bytes->size() - offset);
    chunk.set_data(bytes->substr(offset, size));
    offset += size;
    if (!writer->Write(chunk)) break;  // the client went away
  } while (offset < bytes->size());
  return grpc::Status::OK;
}

absl::StatusOr<ObjectEntry> ObjectCacheService::CheckedEntry(const v1::PutObjectRequest& first) {
  if (!first.has_entry()) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return absl::InvalidArgumentError("PutObject: the first message must carry the entry");
  }
  if (size_t entry_bytes = first.entry().ByteSizeLong(); entry_bytes > limits_.max_entry_bytes) {
    counts_->Add(Statistic::kObjectPutsRefused);
    counts_->Add(Statistic::kObjectPutsRefusedEntryTooBig);
    return absl::ResourceExhaustedError(absl::StrCat(
        "PutObject: the entry's metadata (source path, manifest, key fields) is ", entry_bytes,
        " bytes, over kcached's --object-entry-max-bytes ", limits_.max_entry_bytes));
  }
  absl::StatusOr<ObjectEntry> entry = objects::FromWire(first.entry());
  if (entry.ok() && entry->key.entry_id != ManifestId(entry->manifest)) {
    entry = absl::InvalidArgumentError("PutObject: entry_id is not the manifest's digest");
  }
  if (entry.ok()) {
    if (absl::Status sized = objects::CheckObjectBytes(entry->size, limits_.max_object_bytes);
        !sized.ok()) {
      entry = sized;
    }
  }
  if (!entry.ok()) counts_->Add(Statistic::kObjectPutsRefused);
  return entry;
}

grpc::Status ObjectCacheService::PutObject(grpc::ServerContext* context,
                                           grpc::ServerReader<v1::PutObjectRequest>* reader,
                                           v1::PutObjectResponse*) {
  v1::PutObjectRequest message;
  if (!reader->Read(&message)) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return Invalid("PutObject: the first message must carry the entry");
  }
  absl::StatusOr<ObjectEntry> entry = CheckedEntry(message);
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  entry->put_by = absl::StrCat(peers_->Who(context->peer()).words, " via kcached on ", node_);
  // What the upload may hold (kUploadCopies times its announced size) is taken before a byte
  // of the bundle is read, and held to the end.
  const uint64_t holds = UploadHolds(entry->size);
  if (!uploads_.TryTake(holds)) {
    counts_->Add(Statistic::kObjectPutsRefused);
    counts_->Add(Statistic::kObjectPutsRefusedUploads);
    return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "PutObject: kcached holds ", uploads_.held(), " bytes for uploads in flight; this one's ",
        entry->size, " bytes need ", holds,
        " more (received, then written to the store), over "
        "its --object-upload-max-bytes ",
        uploads_.limit(), ": retry later")));
  }
  BudgetShare share(&uploads_, holds);
  std::string bundle;
  bundle.reserve(entry->size);  // allocated once: never grown past the announced size
  bool more = false;
  do {
    if (message.data().size() > entry->size - bundle.size()) {
      more = true;
      break;
    }
    bundle.append(message.data());
  } while (reader->Read(&message));
  message.Clear();
  if (more || bundle.size() != entry->size) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return Invalid(absl::StrCat("PutObject: the entry announced ", entry->size, " bytes, ",
                                more ? "more" : "fewer", " came"));
  }
  // Moved down to the store, which frees it once encoded (ObjectCache::Put).
  absl::Status put = cache_->Put(*entry, std::move(bundle));
  if (!put.ok()) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return ToGrpcStatus(put);
  }
  counts_->Add(Statistic::kObjectsStored);
  return grpc::Status::OK;
}

grpc::Status ObjectCacheService::AwaitCompile(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::AwaitCompileUpdate, v1::AwaitCompileRequest>* stream) {
  v1::AwaitCompileRequest first;
  if (!stream->Read(&first)) return Invalid("AwaitCompile: the first message must name key1");
  absl::StatusOr<CommandKey> key1 = CommandKey::FromBytes(first.key1());
  if (!key1.ok()) return Invalid("AwaitCompile: key1 is not 32 bytes");
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < std::min(first.seen_entry_ids_size(), kMaxSeenEntryIds); ++i) {
    seen.insert(first.seen_entry_ids(i).substr(0, kEntryIdLength));
  }
  StreamTurnCall call(context, stream);
  turns_->Serve(*key1, seen, first.client(), call);
  return grpc::Status::OK;
}

}  // namespace kcache
