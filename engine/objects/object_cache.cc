#include "engine/objects/object_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kcache::objects {
namespace {

constexpr char kBundleMagic[] = "KCOBJ1";
// More strings than any real dependency file lists: a bound on what a hostile entry makes us
// allocate.
constexpr uint32_t kMaxBundleStrings = 1 << 20;

void PutString(std::string& out, absl::string_view text) {
  uint64_t size = text.size();
  for (int shift = 0; shift < 64; shift += 8) out.push_back(static_cast<char>(size >> shift));
  absl::StrAppend(&out, text);
}

bool TakeView(absl::string_view& in, absl::string_view* text) {
  if (in.size() < 8) return false;
  uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = (size << 8) | static_cast<uint8_t>(in[i]);
  in.remove_prefix(8);
  if (size > in.size()) return false;
  *text = in.substr(0, size);
  in.remove_prefix(size);
  return true;
}

bool TakeString(absl::string_view& in, std::string* text) {
  absl::string_view view;
  if (!TakeView(in, &view)) return false;
  *text = std::string(view);
  return true;
}

bool TakeList(absl::string_view& in, std::vector<std::string>* list) {
  std::string count_text;
  if (!TakeString(in, &count_text)) return false;
  uint32_t count = 0;
  if (!absl::SimpleAtoi(count_text, &count) || count > kMaxBundleStrings) return false;
  list->resize(count);
  for (std::string& item : *list) {
    if (!TakeString(in, &item)) return false;
  }
  return true;
}

void PutList(std::string& out, const std::vector<std::string>& list) {
  PutString(out, absl::StrCat(list.size()));
  for (const std::string& item : list) PutString(out, item);
}

class StoreObjectCache final : public ObjectCache {
 public:
  explicit StoreObjectCache(Store* store) : store_(store) {}
  explicit StoreObjectCache(std::unique_ptr<Store> owned)
      : store_(owned.get()), owned_(std::move(owned)) {}

  absl::StatusOr<std::vector<ObjectEntryMeta>> List(const KernelId& key1) override {
    absl::StatusOr<std::vector<ArtifactMeta>> metas = store_->ListArtifacts(key1);
    if (!metas.ok()) return metas.status();
    return Entries(*metas);
  }

  absl::StatusOr<std::string> Get(const ArtifactKey& key) override {
    absl::StatusOr<Artifact> artifact = store_->Get(key);
    if (!artifact.ok()) return artifact.status();
    return std::move(artifact->bytes);
  }

  absl::Status Put(const ObjectEntryMeta& entry, const std::string& bundle) override {
    return store_->Put(ArtifactFromEntry(entry, bundle));
  }

  absl::Status Delete(const ArtifactKey& key) override { return store_->Delete(key); }

  void RecordUse(const ArtifactKey& key) override { store_->RecordUse(key); }

  absl::StatusOr<ObjectPage> ListClientMade(const std::string& after) override {
    absl::StatusOr<std::vector<ObjectEntryMeta>> all = ListAll();
    if (!all.ok()) return all.status();
    return PageOfEntries(*std::move(all), after, kObjectPageBytes);
  }

  absl::StatusOr<std::vector<ObjectEntryMeta>> ListAll() override {
    absl::StatusOr<std::vector<ArtifactMeta>> metas = store_->ListAllArtifacts();
    if (!metas.ok()) return metas.status();
    return Entries(*metas);
  }

 private:
  static std::vector<ObjectEntryMeta> Entries(const std::vector<ArtifactMeta>& metas) {
    std::vector<ObjectEntryMeta> entries;
    for (const ArtifactMeta& meta : metas) {
      if (meta.key.kind == ArtifactKind::kObject) entries.push_back(EntryMetaFromArtifact(meta));
    }
    return entries;
  }

  Store* store_;
  std::unique_ptr<Store> owned_;  // null when borrowed
};

}  // namespace

std::string EncodeBundle(const ObjectBundle& bundle) {
  std::string out = kBundleMagic;
  PutString(out, bundle.object);
  PutList(out, bundle.deps.targets);
  PutList(out, bundle.deps.deps);
  PutString(out, bundle.stdout_text);
  PutString(out, bundle.stderr_text);
  PutString(out, absl::StrCat(bundle.exit_code));
  return out;
}

absl::StatusOr<ObjectBundleView> DecodeBundleView(absl::string_view bytes) {
  absl::string_view in = bytes;
  ObjectBundleView bundle;
  absl::string_view exit_text;
  bool ok = absl::ConsumePrefix(&in, kBundleMagic) && TakeView(in, &bundle.object) &&
            TakeList(in, &bundle.deps.targets) && TakeList(in, &bundle.deps.deps) &&
            TakeView(in, &bundle.stdout_text) && TakeView(in, &bundle.stderr_text) &&
            TakeView(in, &exit_text) && absl::SimpleAtoi(exit_text, &bundle.exit_code) &&
            in.empty();
  if (!ok) return absl::DataLossError("stored compiler output is not a kcache object bundle");
  return bundle;
}

absl::StatusOr<ObjectBundle> DecodeBundle(absl::string_view bytes) {
  absl::StatusOr<ObjectBundleView> view = DecodeBundleView(bytes);
  if (!view.ok()) return view.status();
  ObjectBundle bundle;
  bundle.object = std::string(view->object);
  bundle.deps = std::move(view->deps);
  bundle.stdout_text = std::string(view->stdout_text);
  bundle.stderr_text = std::string(view->stderr_text);
  bundle.exit_code = view->exit_code;
  return bundle;
}

absl::StatusOr<HeldBytes> ObjectCache::GetHeld(const ArtifactKey& key) {
  absl::StatusOr<std::string> bytes = Get(key);
  if (!bytes.ok()) return bytes.status();
  auto owned = std::make_shared<const std::string>(*std::move(bytes));
  return HeldBytes{*owned, owned};
}

absl::Status CheckObjectBytes(uint64_t bytes, uint64_t max_bytes) {
  if (bytes <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("an object of ", bytes, " bytes is over --max-object-bytes ", max_bytes));
}

ObjectPage PageOfEntries(std::vector<ObjectEntryMeta> entries, const std::string& after,
                         size_t max_bytes) {
  std::vector<std::pair<std::string, ObjectEntryMeta*>> sorted;
  for (ObjectEntryMeta& entry : entries) {
    std::string key = entry.key.Encode();
    if (key > after) sorted.emplace_back(std::move(key), &entry);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  ObjectPage page;
  size_t bytes = 0;
  for (auto& [key, entry] : sorted) {
    if (!page.entries.empty() && bytes >= max_bytes) {
      page.next_after = page.entries.back().key.Encode();
      break;
    }
    bytes += entry->source.size();
    for (const auto& [name, value] : entry->manifest) bytes += name.size() + value.size();
    for (const auto& [name, value] : entry->fields) bytes += name.size() + value.size();
    page.entries.push_back(std::move(*entry));
  }
  return page;
}

std::unique_ptr<ObjectCache> NewStoreObjectCache(Store* store) {
  return std::make_unique<StoreObjectCache>(store);
}

std::unique_ptr<ObjectCache> NewOwningStoreObjectCache(std::unique_ptr<Store> store) {
  return std::make_unique<StoreObjectCache>(std::move(store));
}

ArtifactKey ObjectArtifactKey(const KernelId& key1, const Manifest& manifest) {
  ArtifactKey key;
  key.kernel_id = key1;
  key.kind = ArtifactKind::kObject;
  key.toolkit = ManifestId(manifest);
  return key;
}

ObjectEntryMeta EntryMetaFromArtifact(const ArtifactMeta& meta) {
  ObjectEntryMeta entry;
  entry.key = meta.key;
  entry.source = meta.kernel_name;
  entry.manifest = meta.lowered_names;
  entry.size = meta.size;
  for (absl::string_view line : absl::StrSplit(meta.compile_log, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    std::string name, value;
    if (parts.size() == 2 && absl::CUnescape(parts[0], &name) &&
        absl::CUnescape(parts[1], &value)) {
      entry.fields.emplace_back(std::move(name), std::move(value));
    }
  }
  return entry;
}

Artifact ArtifactFromEntry(const ObjectEntryMeta& entry, std::string bundle_bytes) {
  Artifact artifact;
  artifact.meta.key = entry.key;
  artifact.meta.kernel_name = entry.source;
  artifact.meta.lowered_names = entry.manifest;
  for (const KeyField& field : entry.fields) {
    // Fields hold no newlines or tabs of their own except in hostile arguments: escape them.
    absl::StrAppend(&artifact.meta.compile_log, absl::CEscape(field.first), "\t",
                    absl::CEscape(field.second), "\n");
  }
  artifact.meta.created_unix_ms = NowUnixMillis();
  artifact.bytes = std::move(bundle_bytes);
  return artifact;
}

}  // namespace kcache::objects
