// Computing a compile command's key1.
#include "engine/keys/command_key.h"

#include "absl/strings/str_cat.h"
#include "core/sha256.h"

namespace kcache::objects {
namespace {

// Bumped whenever what goes into key1 or an entry's manifest changes: old entries then simply
// miss. v2: manifests record what the compile was observed to read (observed_manifest.h).
constexpr char kObjectKeyDomain[] = "kcache.object.v2";

// key1 over the fields gathered.
ObjectKey Finish(ObjectKey key) {
  key.key1 = KeyOverFields(kObjectKeyDomain, key.fields);
  return key;
}

}  // namespace

CommandKey KeyOverFields(absl::string_view domain, const std::vector<KeyField>& fields) {
  std::string framing(domain);
  framing.push_back('\0');
  for (const KeyField& field : fields) {
    AppendKeyFrame(framing, field.first);
    AppendKeyFrame(framing, field.second);
  }
  return CommandKey(Sha256Of(framing));
}

absl::StatusOr<ObjectKey> ComputeObjectKey(const CompilerCommand& command,
                                           const std::vector<ToolFile>& tools,
                                           const Environment& env, const BaseDirs& dirs,
                                           FileDigests& digests, UncachedReason* reason,
                                           const std::string& native_expansion) {
  ObjectKey key;
  key.fields.emplace_back("compiler", std::string(CompilerFamilyName(command.family)));
  if (command.kind == CompilerOutput::kSharedLibrary) key.fields.emplace_back("output", "shared");
  if (command.kind == CompilerOutput::kLinkedLibrary) key.fields.emplace_back("output", "link");
  if (command.kind == CompilerOutput::kPrecompiledHeader) key.fields.emplace_back("output", "pch");
  if (command.kind == CompilerOutput::kDeviceCode) key.fields.emplace_back("output", "device");
  for (const std::string& arg : command.keyed_args) {
    key.fields.emplace_back("arg", dirs.Normalize(arg));
  }
  std::vector<std::string> tool_paths;
  for (const ToolFile& tool : tools) {
    if (!tool.path.empty()) tool_paths.push_back(tool.path);
  }
  std::vector<absl::StatusOr<FileDigest>> tool_digests =
      digests.DigestAll(tool_paths, DigestKind::kTool);
  size_t next_digest = 0;
  for (const ToolFile& tool : tools) {
    std::string digest = "absent";
    if (!tool.path.empty()) {
      const absl::StatusOr<FileDigest>& file = tool_digests[next_digest++];
      if (!file.ok()) {
        *reason = UncachedReason::kUnreadableInput;
        return absl::FailedPreconditionError(file.status().message());
      }
      digest = file->hex;
    }
    key.fields.emplace_back(absl::StrCat("tool ", tool.role), digest);
  }
  std::vector<std::string> names = KeyedEnvironment(command.family);
  if (RunsLinker(command.kind)) {
    for (const std::string& name : KeyedLinkEnvironment()) names.push_back(name);
  }
  for (const std::string& name : names) {
    auto it = env.find(name);
    key.fields.emplace_back(
        absl::StrCat("env ", name),
        it == env.end() ? "(unset)" : absl::StrCat("=", dirs.Normalize(it->second)));
  }
  if (!native_expansion.empty()) key.fields.emplace_back("native target", native_expansion);
  key.source = dirs.Normalize(CommandSubject(command));
  if (command.kind == CompilerOutput::kLinkedLibrary) {  // its objects, as the linker reads them
    for (const std::string& object : command.objects) {
      absl::StatusOr<FileDigest> digest =
          digests.Digest(dirs.Resolve(object), DigestKind::kLinkInput);
      if (!digest.ok()) {
        *reason = UncachedReason::kUnreadableInput;
        return absl::FailedPreconditionError(digest.status().message());
      }
      key.fields.emplace_back(absl::StrCat("object ", dirs.Normalize(object)), digest->hex);
    }
    return Finish(std::move(key));
  }
  absl::StatusOr<FileDigest> source = digests.Digest(dirs.Resolve(command.source));
  if (!source.ok()) {
    *reason = UncachedReason::kUnreadableInput;
    return absl::FailedPreconditionError(source.status().message());
  }
  if (source->has_time_macro) {
    *reason = UncachedReason::kTimeMacros;
    return absl::FailedPreconditionError(absl::StrCat(command.source, " names a time macro"));
  }
  key.fields.emplace_back("source", source->hex);
  if (command.debug_info) key.fields.emplace_back("cwd (debug info)", dirs.cwd);
  return Finish(std::move(key));
}

}  // namespace kcache::objects
