#include "daemon/service/object_cache_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/service/grpc_status.h"
#include "engine/objects/object_wire.h"

namespace kcache {
namespace {

grpc::Status Invalid(absl::string_view message) {
  return ToGrpcStatus(absl::InvalidArgumentError(message));
}

}  // namespace

absl::Status ListObjectsByKey(objects::ObjectCache& cache, const v1::ListObjectsRequest& request,
                              v1::ListObjectsResponse* response) {
  absl::StatusOr<KernelId> key1 = KernelId::FromBytes(request.key1());
  if (!key1.ok()) return absl::InvalidArgumentError("ListObjects: key1 is not 32 bytes");
  absl::StatusOr<std::vector<objects::ObjectEntryMeta>> entries = cache.List(*key1);
  if (!entries.ok()) return entries.status();
  for (const objects::ObjectEntryMeta& entry : *entries) {
    objects::ToWire(entry, response->add_entries());
  }
  return absl::OkStatus();
}

namespace {

// The entry `request` names (InvalidArgument for a malformed key1 or entry_id).
absl::StatusOr<ArtifactKey> KeyOf(const v1::GetObjectRequest& request) {
  v1::ObjectEntry wire;
  wire.set_key1(request.key1());
  wire.set_entry_id(request.entry_id());
  absl::StatusOr<objects::ObjectEntryMeta> entry = objects::FromWire(std::move(wire));
  if (!entry.ok()) return entry.status();
  return entry->key;
}

}  // namespace

absl::StatusOr<std::string> GetObjectBytes(objects::ObjectCache& cache,
                                           const v1::GetObjectRequest& request) {
  absl::StatusOr<ArtifactKey> key = KeyOf(request);
  if (!key.ok()) return key.status();
  return cache.Get(*key);
}

void RecordObjectUse(objects::ObjectCache& cache, const v1::GetObjectRequest& request) {
  if (absl::StatusOr<ArtifactKey> key = KeyOf(request); key.ok()) cache.RecordUse(*key);
}

grpc::Status ObjectCacheService::ListObjects(grpc::ServerContext*,
                                             const v1::ListObjectsRequest* request,
                                             v1::ListObjectsResponse* response) {
  absl::StatusOr<std::vector<objects::ObjectEntryMeta>> entries;
  if (request->all() && request->client_made()) {
    absl::StatusOr<objects::ObjectPage> page = cache_->ListClientMade(request->page_after());
    if (!page.ok()) return ToGrpcStatus(page.status());
    response->set_next_page_after(page->next_after);
    entries = std::move(page->entries);
  } else if (request->all()) {
    entries = cache_->ListAll();
  } else {
    counts_->Add(Statistic::kObjectLookups);
    return ToGrpcStatus(ListObjectsByKey(*cache_, *request, response));
  }
  if (!entries.ok()) return ToGrpcStatus(entries.status());
  for (const objects::ObjectEntryMeta& entry : *entries) {
    objects::ToWire(entry, response->add_entries());
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

grpc::Status ObjectCacheService::PutObject(grpc::ServerContext*,
                                           grpc::ServerReader<v1::PutObjectRequest>* reader,
                                           v1::PutObjectResponse*) {
  v1::PutObjectRequest message;
  if (!reader->Read(&message) || !message.has_entry()) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return Invalid("PutObject: the first message must carry the entry");
  }
  absl::StatusOr<objects::ObjectEntryMeta> entry = objects::FromWire(message.entry());
  if (entry.ok() && entry->key.toolkit != objects::ManifestId(entry->manifest)) {
    entry = absl::InvalidArgumentError("PutObject: entry_id is not the manifest's digest");
  }
  if (entry.ok() && entry->size > max_object_bytes_) {
    entry = absl::ResourceExhaustedError(
        absl::StrCat("PutObject: ", entry->size, " bytes is over kcached's --max-object-bytes ",
                     max_object_bytes_));
  }
  if (!entry.ok()) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return ToGrpcStatus(entry.status());
  }
  std::string bundle = message.data();
  while (bundle.size() <= entry->size && reader->Read(&message)) bundle += message.data();
  if (bundle.size() != entry->size) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return Invalid(absl::StrCat("PutObject: the entry announced ", entry->size, " bytes, ",
                                bundle.size() > entry->size ? "more" : "fewer", " came"));
  }
  absl::Status put = cache_->Put(*entry, bundle);
  if (!put.ok()) {
    counts_->Add(Statistic::kObjectPutsRefused);
    return ToGrpcStatus(put);
  }
  counts_->Add(Statistic::kObjectsStored);
  return grpc::Status::OK;
}

}  // namespace kcache
