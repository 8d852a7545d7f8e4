#include "engine/objects/object_key.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "core/sha256.h"

namespace kcache::objects {
namespace {

// Bumped whenever what goes into key1 or an entry's manifest changes: old entries then simply
// miss. v2: manifests record what the compile was observed to read (observed_manifest.h).
constexpr char kObjectKeyDomain[] = "kcache.object.v2";

bool IsBoundary(const std::string& text, size_t pos) {
  if (pos >= text.size()) return true;
  char c = text[pos];
  return c == '/' || c == ' ' || c == ':' || c == '\'' || c == '"' || c == ',' || c == '=' ||
         c == ';' || c == ')' || c == '\n' || c == '\t';
}

std::string Token(size_t index) { return index == 0 ? "@cwd@" : absl::StrCat("@base", index, "@"); }

void AppendField(std::string& out, absl::string_view tag, absl::string_view value) {
  for (absl::string_view part : {tag, value}) {
    uint32_t size = static_cast<uint32_t>(part.size());
    for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>(size >> shift));
    absl::StrAppend(&out, part);
  }
}

std::string Resolve(const std::string& path, const BaseDirs& dirs) {
  std::string restored = dirs.Restore(path);
  if (!restored.empty() && restored[0] == '/') return restored;
  return absl::StrCat(dirs.cwd, "/", restored);
}

// Whether a file whose later of mtime and ctime is `changed` may have changed after the
// compiler started at `compiled_from`.
bool ChangedDuringCompile(absl::Time changed, absl::Time compiled_from) {
  bool whole_seconds = absl::ToUnixNanos(changed) % 1000000000 == 0;
  return changed >= compiled_from - (whole_seconds ? absl::Seconds(1) : absl::ZeroDuration());
}

// key1 over the fields gathered.
ObjectKey Finish(ObjectKey key) {
  std::string framing = kObjectKeyDomain;
  framing.push_back('\0');
  for (const KeyField& field : key.fields) AppendField(framing, field.first, field.second);
  key.key1 = KernelId(Sha256Of(framing));
  return key;
}

}  // namespace

std::string BaseDirs::Normalize(const std::string& text) const {
  std::vector<std::pair<std::string, std::string>> order;  // (dir, token), longest first
  order.emplace_back(cwd, Token(0));
  for (size_t i = 0; i < roots.size(); ++i) order.emplace_back(roots[i], Token(i + 1));
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string out = text;
  for (const auto& [dir, token] : order) {
    if (dir.empty() || dir == "/") continue;
    std::string next;
    size_t pos = 0;
    while (true) {
      size_t hit = out.find(dir, pos);
      if (hit == std::string::npos) break;
      bool whole = IsBoundary(out, hit + dir.size());
      next.append(out, pos, hit - pos);
      next.append(whole ? token : dir);
      pos = hit + dir.size();
    }
    next.append(out, pos, std::string::npos);
    out = std::move(next);
  }
  return out;
}

std::string BaseDirs::Restore(const std::string& text) const {
  if (text.find('@') == std::string::npos) return text;
  std::vector<std::pair<std::string, std::string>> replacements;
  replacements.emplace_back(Token(0), cwd);
  for (size_t i = 0; i < roots.size(); ++i) replacements.emplace_back(Token(i + 1), roots[i]);
  return absl::StrReplaceAll(text, replacements);
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
          digests.Digest(Resolve(object, dirs), DigestKind::kLinkInput);
      if (!digest.ok()) {
        *reason = UncachedReason::kUnreadableInput;
        return absl::FailedPreconditionError(digest.status().message());
      }
      key.fields.emplace_back(absl::StrCat("object ", dirs.Normalize(object)), digest->hex);
    }
    return Finish(std::move(key));
  }
  absl::StatusOr<FileDigest> source = digests.Digest(Resolve(command.source, dirs));
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

DepFile ParseDepFile(const std::string& text) {
  DepFile deps;
  std::vector<std::string>* into = &deps.targets;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) into->push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      char n = text[i + 1];
      if (n == '\n' || n == '\r') {
        flush();
        ++i;
        continue;
      }
      if (n == ' ' || n == '#' || n == '\\') {
        word.push_back(n);
        ++i;
        continue;
      }
    }
    if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      word.push_back('$');
      ++i;
    } else if (c == ':' && into == &deps.targets &&
               (i + 1 >= text.size() || text[i + 1] == ' ' || text[i + 1] == '\n' ||
                text[i + 1] == '\r')) {
      flush();
      into = &deps.deps;
    } else if (c == '\n' && into == &deps.deps) {
      // A rule ends; -MP phony targets that follow name headers already listed.
      flush();
      break;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
  return deps;
}

std::string WriteDepFile(const DepFile& deps) {
  auto escape = [](const std::string& path) {
    return absl::StrReplaceAll(path, {{"\\", "\\\\"}, {" ", "\\ "}, {"#", "\\#"}, {"$", "$$"}});
  };
  std::string out;
  for (size_t i = 0; i < deps.targets.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : " ", escape(deps.targets[i]));
  }
  absl::StrAppend(&out, ":");
  for (const std::string& dep : deps.deps) absl::StrAppend(&out, " \\\n  ", escape(dep));
  absl::StrAppend(&out, "\n");
  return out;
}

namespace {

// One manifest line per path, in order; `text_rules`: the time-macro rule applies.
absl::StatusOr<Manifest> ManifestOf(const std::vector<std::string>& paths, const BaseDirs& dirs,
                                    FileDigests& digests, UncachedReason* reason,
                                    absl::Time compiled_from, bool text_rules, DigestKind kind) {
  Manifest manifest;
  digests.BeginPass();
  for (const std::string& dep : paths) {
    std::string normalized = dirs.Normalize(dep);
    absl::StatusOr<FileDigest> digest = digests.Digest(Resolve(normalized, dirs), kind);
    if (!digest.ok()) {
      *reason = UncachedReason::kUnreadableInput;
      return absl::FailedPreconditionError(digest.status().message());
    }
    if (text_rules && digest->has_time_macro) {
      *reason = UncachedReason::kTimeMacros;
      return absl::FailedPreconditionError(absl::StrCat(dep, " names a time macro"));
    }
    if (ChangedDuringCompile(digest->changed, compiled_from)) {
      *reason = UncachedReason::kInputChanged;
      return absl::FailedPreconditionError(absl::StrCat(dep, " changed while it compiled"));
    }
    manifest.emplace_back(std::move(normalized), digest->hex);
  }
  return manifest;
}

}  // namespace

absl::StatusOr<Manifest> MakeManifest(const DepFile& deps, const BaseDirs& dirs,
                                      FileDigests& digests, UncachedReason* reason,
                                      absl::Time compiled_from) {
  return ManifestOf(deps.deps, dirs, digests, reason, compiled_from, /*text_rules=*/true,
                    DigestKind::kContent);
}

absl::StatusOr<Manifest> MakeInputManifest(const std::vector<std::string>& paths,
                                           const BaseDirs& dirs, FileDigests& digests,
                                           UncachedReason* reason, absl::Time compiled_from,
                                           DigestKind kind) {
  return ManifestOf(paths, dirs, digests, reason, compiled_from, /*text_rules=*/false, kind);
}

std::string EnvironmentFact(const std::string& name, const Environment& env, const BaseDirs& dirs) {
  auto it = env.find(name);
  if (it == env.end()) return "(unset)";
  if (name == "PWD") {
    // gcc (getpwd) and others use $PWD for the working directory only when it names it.
    struct stat pwd {
    }, cwd{};
    if (it->second.empty() || it->second[0] != '/' || stat(it->second.c_str(), &pwd) != 0 ||
        stat(dirs.cwd.c_str(), &cwd) != 0 || pwd.st_dev != cwd.st_dev || pwd.st_ino != cwd.st_ino) {
      return "(not the working directory)";
    }
  }
  return absl::StrCat("=", dirs.Normalize(it->second));
}

namespace {

// What a manifest line says of its path, for a message.
std::string Difference(const std::pair<std::string, std::string>& line, const std::string& path,
                       FileDigests& digests) {
  absl::string_view value = line.second;
  if (value == kAbsentFact) return absl::StrCat(path, " exists now");
  for (absl::string_view prefix : {kExistsPrefix, kLexistsPrefix, kFailedPrefix, kReadlinkPrefix,
                                   kRealpathPrefix, kListingPrefix}) {
    if (absl::StartsWith(value, prefix)) {
      return absl::StrCat(path, " is not what it was (recorded ", value, ")");
    }
  }
  absl::ConsumePrefix(&value, kResolvesToItselfMark);
  bool linked = absl::StartsWith(value, kLinkInputPrefix);
  bool tool = absl::StartsWith(value, kToolPrefix);
  // Digested as recorded: a library's whole bytes would be read for one word.
  absl::StatusOr<FileDigest> digest = digests.Digest(
      path, linked ? DigestKind::kLinkInput : (tool ? DigestKind::kTool : DigestKind::kContent));
  return absl::StrCat(linked ? "linker input " : (tool ? "program " : "header "), path,
                      digest.ok() ? " changed" : " is missing");
}

}  // namespace

bool ManifestMatches(const Manifest& manifest, const BaseDirs& dirs, const Environment& env,
                     FileDigests& digests, std::string* first_difference) {
  for (const auto& [path, recorded] : manifest) {
    if (path.empty() || path[0] != '$') continue;
    std::string name = path.substr(1);
    std::string now = EnvironmentFact(name, env, dirs);
    if (now == recorded) continue;
    if (first_difference != nullptr) {
      *first_difference = absl::StrCat("environment ", name, " differs: recorded '", recorded,
                                       "', now '", now, "'");
    }
    return false;
  }
  digests.BeginPass();
  std::vector<FileDigests::Expected> files;
  std::vector<size_t> lines;          // files[i] is manifest[lines[i]]
  std::vector<std::string> restored;  // a link target or realpath answer, with this machine's dirs
  restored.reserve(manifest.size());
  files.reserve(manifest.size());
  for (size_t i = 0; i < manifest.size(); ++i) {
    const auto& [path, recorded] = manifest[i];
    if (!path.empty() && path[0] == '$') continue;
    absl::string_view value = recorded;
    for (absl::string_view prefix : {kReadlinkPrefix, kRealpathPrefix}) {
      if (absl::StartsWith(value, prefix)) {
        restored.push_back(
            absl::StrCat(prefix, dirs.Restore(std::string(value.substr(prefix.size())))));
        value = restored.back();
      }
    }
    files.push_back({Resolve(path, dirs), value});
    lines.push_back(i);
  }
  size_t bad = digests.FirstMismatch(files);
  if (bad == files.size()) return true;
  if (first_difference != nullptr) {
    *first_difference = Difference(manifest[lines[bad]], files[bad].path, digests);
  }
  return false;
}

std::string ManifestId(const Manifest& manifest) {
  std::string framing;
  for (const auto& [path, digest] : manifest) AppendField(framing, path, digest);
  return Sha256Hex(framing);
}

}  // namespace kcache::objects
