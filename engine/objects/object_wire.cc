#include "engine/objects/object_wire.h"

#include "absl/strings/str_cat.h"

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
  return entry;
}

}  // namespace kcache::objects
