#include "engine/objects/object_wire.h"

#include "absl/strings/str_cat.h"
#include "engine/objects/object_bundle.h"

namespace kcache::objects {

void ToWire(const ObjectEntry& entry, v1::ObjectEntry* wire) {
  wire->set_key1(std::string(entry.key.command.Bytes()));
  wire->set_entry_id(entry.key.entry_id);
  wire->set_source(entry.source);
  for (const auto& [path, digest] : entry.manifest) {
    v1::ObjectPair* line = wire->add_manifest();
    line->set_name(path);
    line->set_value(digest);
  }
  for (const auto& [name, value] : entry.fields) {
    v1::ObjectPair* field = wire->add_fields();
    field->set_name(name);
    field->set_value(value);
  }
  wire->set_size(entry.size);
  wire->set_put_by(entry.put_by);
}

absl::StatusOr<ObjectEntry> FromWire(v1::ObjectEntry wire) {
  absl::StatusOr<CommandKey> key1 = CommandKey::FromBytes(wire.key1());
  if (!key1.ok()) return absl::InvalidArgumentError("object entry: key1 is not 32 bytes");
  bool hex = wire.entry_id().size() == 64;
  for (char c : wire.entry_id()) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex) return absl::InvalidArgumentError("object entry: entry_id is not 64 hex digits");
  if (wire.manifest_size() > kMaxWireManifestLines || wire.fields_size() > kMaxWireManifestLines ||
      wire.ByteSizeLong() > kMaxWireEntryBytes) {
    return absl::InvalidArgumentError(absl::StrCat("object entry: over ", kMaxWireManifestLines,
                                                   " lines or ", kMaxWireEntryBytes, " bytes"));
  }
  ObjectEntry entry;
  entry.key.command = *key1;
  entry.key.entry_id = std::move(*wire.mutable_entry_id());
  entry.source = std::move(*wire.mutable_source());
  entry.manifest.reserve(wire.manifest_size());
  for (v1::ObjectPair& line : *wire.mutable_manifest()) {
    entry.manifest.emplace_back(std::move(*line.mutable_name()), std::move(*line.mutable_value()));
  }
  for (v1::ObjectPair& field : *wire.mutable_fields()) {
    entry.fields.emplace_back(std::move(*field.mutable_name()), std::move(*field.mutable_value()));
  }
  entry.size = wire.size();
  entry.put_by = std::move(*wire.mutable_put_by());
  return entry;
}

std::string EncodeHandedEntry(const ObjectEntry& entry, absl::string_view bundle) {
  v1::ObjectEntry wire;
  ToWire(entry, &wire);
  std::string out;
  PutFramed(out, wire.SerializeAsString());
  absl::StrAppend(&out, bundle);
  return out;
}

absl::StatusOr<std::pair<ObjectEntry, std::string>> DecodeHandedEntry(absl::string_view bytes) {
  absl::string_view framed;
  if (!TakeFramed(bytes, &framed)) {
    return absl::InvalidArgumentError("the input is not an entry and a bundle");
  }
  v1::ObjectEntry wire;
  if (!wire.ParseFromArray(framed.data(), static_cast<int>(framed.size()))) {
    return absl::InvalidArgumentError("the entry does not parse");
  }
  absl::StatusOr<ObjectEntry> entry = FromWire(std::move(wire));
  if (!entry.ok()) return entry.status();
  if (entry->key != ObjectEntryKey::Of(entry->key.command, entry->manifest)) {
    return absl::InvalidArgumentError("the entry's id is not its manifest's");
  }
  entry->size = bytes.size();
  return std::make_pair(*std::move(entry), std::string(bytes));
}

void AppendHandedEntry(std::string& out, const ObjectEntry& entry, absl::string_view bundle) {
  PutFramed(out, EncodeHandedEntry(entry, bundle));
}

absl::StatusOr<std::vector<std::pair<ObjectEntry, std::string>>> DecodeHandedEntries(
    absl::string_view bytes) {
  std::vector<std::pair<ObjectEntry, std::string>> entries;
  absl::string_view one;
  while (!bytes.empty()) {
    if (!TakeFramed(bytes, &one)) return absl::InvalidArgumentError("a handed entry is cut short");
    absl::StatusOr<std::pair<ObjectEntry, std::string>> entry = DecodeHandedEntry(one);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  return entries;
}

}  // namespace kcache::objects
