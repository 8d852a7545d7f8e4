#include "engine/nvrtc/nvrtc_compile.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/coding.h"
#include "core/library_build.h"
#include "core/xxh128.h"
#include "engine/keys/observed_manifest.h"
#include "engine/objects/object_bundle.h"

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

// Bumped whenever what goes into an NVRTC compile's key1 or manifest changes: old entries
// then simply miss. Never a command's domain (command_key.cc): the two never share a key.
constexpr char kNvrtcKeyDomain[] = "kcache.nvrtc.v1";
// key1's field of the program's name, and of its last component in a key for any directory.
constexpr char kNameField[] = "name";
constexpr char kAnyDirectoryNameField[] = "name in any directory";

absl::Status Uncached(UncachedReason* reason, UncachedReason why, std::string message) {
  *reason = why;
  return absl::FailedPreconditionError(std::move(message));
}

constexpr absl::string_view kOutcomeMagic = "kcache.nvrtc-outcome.v1\n";

// Reads the outcome's fields in order, each bounds-checked.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  bool U32(uint32_t* value) { return GetFixed32(rest_, value); }
  bool I32(int* value) {
    uint32_t raw = 0;
    if (!U32(&raw)) return false;
    *value = static_cast<int>(raw);
    return true;
  }
  bool U64(uint64_t* value) { return GetFixed64(rest_, value); }
  bool Bytes(std::string* out) {
    absl::string_view bytes;
    if (!TakeFramed(rest_, &bytes)) return false;
    out->assign(bytes.data(), bytes.size());
    return true;
  }
  bool done() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
};

}  // namespace

NvrtcOutput KeptNvrtcOutput(int size_result, uint64_t size, int result, const char* bytes) {
  NvrtcOutput output;
  output.size_result = size_result;
  output.size = size_result == 0 ? size : 0;
  output.result = result;
  if (result == 0 && bytes != nullptr) output.bytes.assign(bytes, output.size);
  return output;
}

std::string EncodeNvrtcOutcome(const NvrtcOutcome& outcome) {
  std::string out(kOutcomeMagic);
  PutFixed32(out, static_cast<uint32_t>(outcome.result));
  for (const NvrtcOutput& output : outcome.outputs) {
    PutFixed32(out, static_cast<uint32_t>(output.size_result));
    PutFixed64(out, output.size);
    PutFixed32(out, static_cast<uint32_t>(output.result));
    PutFramed(out, output.bytes);
  }
  PutFixed32(out, static_cast<uint32_t>(outcome.lowered.size()));
  for (const auto& [result, name] : outcome.lowered) {
    PutFixed32(out, static_cast<uint32_t>(result));
    PutFramed(out, name);
  }
  return out;
}

absl::StatusOr<NvrtcOutcome> DecodeNvrtcOutcome(absl::string_view bytes, size_t name_expressions) {
  auto damaged = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("an NVRTC outcome that does not decode: ", what));
  };
  if (!absl::StartsWith(bytes, kOutcomeMagic)) return damaged("no magic");
  Reader in(bytes.substr(kOutcomeMagic.size()));
  NvrtcOutcome outcome;
  if (!in.I32(&outcome.result)) return damaged("cut short");
  for (NvrtcOutput& output : outcome.outputs) {
    if (!in.I32(&output.size_result) || !in.U64(&output.size) || !in.I32(&output.result) ||
        !in.Bytes(&output.bytes)) {
      return damaged("cut short");
    }
    // A content getter that succeeded wrote what its size getter said.
    if (output.result == 0 && (output.size_result != 0 || output.bytes.size() != output.size)) {
      return damaged("an output whose bytes are not its size");
    }
  }
  uint32_t count = 0;
  if (!in.U32(&count)) return damaged("cut short");
  if (count != name_expressions) return damaged("lowered names are not one per name expression");
  for (uint32_t i = 0; i < count; ++i) {
    int result = 0;
    std::string name;
    if (!in.I32(&result) || !in.Bytes(&name)) return damaged("cut short");
    outcome.lowered.emplace_back(result, std::move(name));
  }
  if (!in.done()) return damaged("bytes past its end");
  return outcome;
}

bool NamesNativeArch(const std::vector<std::string>& options) {
  for (size_t i = 0; i < options.size(); ++i) {
    absl::string_view option = options[i];
    for (absl::string_view flag : {"-arch", "--gpu-architecture"}) {
      if (option == flag && i + 1 < options.size() && options[i + 1] == "native") return true;
      if (option == absl::StrCat(flag, "=native")) return true;
    }
  }
  return false;
}

absl::StatusOr<ObjectKey> NvrtcCommandKey(const NvrtcProgram& program, const NvrtcContext& context,
                                          UncachedReason* reason) {
  if (NamesNativeArch(program.options)) {
    return Uncached(reason, UncachedReason::kNativeTarget,
                    "-arch=native: the GPU here decides the code, and no key says which");
  }
  ObjectKey key;
  key.source = program.name;
  absl::StatusOr<std::string> library = LibraryBuild(context.library);
  if (!library.ok()) {
    return Uncached(reason, UncachedReason::kUnreadableInput,
                    absl::StrCat("NVRTC ", context.library, ": ", library.status().message()));
  }
  key.fields.emplace_back("nvrtc", *library);
  key.fields.emplace_back("nvrtc version", absl::StrCat(context.major, ".", context.minor));
  if (context.driver.empty()) {
    key.fields.emplace_back("driver", "none");
  } else {
    absl::StatusOr<std::string> driver = LibraryBuild(context.driver);
    if (!driver.ok()) {
      return Uncached(reason, UncachedReason::kUnreadableInput,
                      absl::StrCat("driver ", context.driver, ": ", driver.status().message()));
    }
    key.fields.emplace_back("driver", *driver);
  }
  key.fields.emplace_back("cwd", context.cwd);
  key.fields.emplace_back(kNameField, program.name);
  key.fields.emplace_back("source", Xxh128Hex(program.source));
  for (const auto& [name, content] : program.headers) {
    key.fields.emplace_back("header name", name);
    key.fields.emplace_back("header", Xxh128Hex(content));
  }
  const BaseDirs shims{"", {}, context.shims};  // the options' paths under it, as "@shims@"
  for (const std::string& option : program.options) {
    key.fields.emplace_back("arg", shims.Normalize(option));
  }
  for (const std::string& expression : program.name_expressions) {
    key.fields.emplace_back("name expression", expression);
  }
  key.key1 = KeyOverFields(kNvrtcKeyDomain, key.fields);
  return key;
}

std::optional<NvrtcNameDirectory> NvrtcNameDirectoryOf(const std::string& name,
                                                       const std::string& cwd) {
  size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash + 1 == name.size()) return std::nullopt;
  fs::path directory = fs::path(name.substr(0, slash + 1));
  if (directory.is_relative()) directory = fs::path(cwd) / directory;
  std::string normal = directory.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  if (normal == "/" || normal == fs::path(cwd).lexically_normal().string()) return std::nullopt;
  return NvrtcNameDirectory{normal, name.substr(slash + 1)};
}

ObjectKey NvrtcAnyDirectoryKey(const ObjectKey& key, const NvrtcNameDirectory& name) {
  ObjectKey any = key;
  for (KeyField& field : any.fields) {
    if (field.first == kNameField) field = {kAnyDirectoryNameField, name.base};
  }
  any.key1 = KeyOverFields(kNvrtcKeyDomain, any.fields);
  return any;
}

BaseDirs NvrtcDirs(const NvrtcContext& context) { return BaseDirs{context.cwd, {}, context.shims}; }

BaseDirs NvrtcAnyDirectoryDirs(const NvrtcContext& context, const NvrtcNameDirectory& name) {
  return BaseDirs{context.cwd, {name.directory}, context.shims};
}

absl::StatusOr<std::pair<HeaderManifest, NvrtcDirectoryState>> NvrtcAnyDirectoryManifest(
    const HeaderManifest& manifest, const NvrtcContext& context, const NvrtcNameDirectory& name) {
  const BaseDirs before = NvrtcDirs(context);
  const BaseDirs after = NvrtcAnyDirectoryDirs(context, name);
  const std::string directory = after.Normalize(name.directory);  // "@base1@"
  const std::string program = absl::StrCat(directory, "/", name.base);
  std::pair<HeaderManifest, NvrtcDirectoryState> made;
  for (const auto& [path, fact] : manifest) {
    if (!path.empty() && path[0] == '$') {  // a variable: its value's directories
      made.first.emplace_back(path, after.Normalize(before.Restore(fact)));
      continue;
    }
    std::string moved = after.Normalize(before.Resolve(path));
    if (moved == directory || absl::StartsWith(moved, absl::StrCat(directory, "/"))) {
      bool exists = fact == absl::StrCat(kExistsPrefix, moved == directory ? "dir" : "file");
      if ((moved != directory && moved != program) || (!exists && fact != kAbsentFact)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "NVRTC looked at ", before.Resolve(path), " (", fact, ") in the program's directory"));
      }
      (moved == directory ? made.second.directory_exists : made.second.name_exists) = exists;
    }
    made.first.emplace_back(std::move(moved), fact);
  }
  return made;
}

std::string EncodeNvrtcCompile(const NvrtcProgram& program, const NvrtcContext& context) {
  std::string out;
  for (const std::string* field : {&program.source, &program.name, &context.library, &context.cwd,
                                   &context.driver, &context.shims}) {
    PutFramed(out, *field);
  }
  PutFramed(out, absl::StrCat(context.major, ".", context.minor));
  PutFramed(out, absl::StrCat(program.headers.size()));
  for (const auto& [name, content] : program.headers) {
    PutFramed(out, name);
    PutFramed(out, content);
  }
  for (const std::vector<std::string>* list : {&program.name_expressions, &program.options}) {
    PutFramed(out, absl::StrCat(list->size()));
    for (const std::string& item : *list) PutFramed(out, item);
  }
  return out;
}

absl::StatusOr<std::pair<NvrtcProgram, NvrtcContext>> DecodeNvrtcCompile(absl::string_view bytes) {
  auto refused = [] { return absl::InvalidArgumentError("not an NVRTC compile"); };
  std::pair<NvrtcProgram, NvrtcContext> decoded;
  auto& [program, context] = decoded;
  auto take = [&bytes](std::string* out) {
    absl::string_view field;
    if (!TakeFramed(bytes, &field)) return false;
    out->assign(field.data(), field.size());
    return true;
  };
  // A count of what follows, each at least a frame's 4 bytes: no more than the bytes hold.
  auto count = [&](size_t* n) {
    std::string text;
    return take(&text) && absl::SimpleAtoi(text, n) && *n <= bytes.size() / 4;
  };
  std::string version;
  for (std::string* field : {&program.source, &program.name, &context.library, &context.cwd,
                             &context.driver, &context.shims, &version}) {
    if (!take(field)) return refused();
  }
  std::pair<std::string, std::string> numbers = absl::StrSplit(version, '.');
  size_t n = 0;
  if (!absl::SimpleAtoi(numbers.first, &context.major) ||
      !absl::SimpleAtoi(numbers.second, &context.minor) || !count(&n)) {
    return refused();
  }
  program.headers.resize(n);
  for (auto& [name, content] : program.headers) {
    if (!take(&name) || !take(&content)) return refused();
  }
  for (std::vector<std::string>* list : {&program.name_expressions, &program.options}) {
    if (!count(&n)) return refused();
    list->resize(n);
    for (std::string& item : *list) {
      if (!take(&item)) return refused();
    }
  }
  if (!bytes.empty()) return refused();
  return decoded;
}

absl::StatusOr<HeaderManifest> NvrtcManifest(const observe::ObservedReads& record,
                                             const BaseDirs& dirs, const Environment& env,
                                             FileDigests& digests, absl::Time compiled_from,
                                             UncachedReason* reason) {
  for (const observe::EnvRead& read : record.env) {
    if (!read.value) continue;
    std::vector<std::string> words =
        absl::StrSplit(*read.value, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    if (NamesNativeArch(words)) {
      return Uncached(reason, UncachedReason::kNativeTarget,
                      absl::StrCat("NVRTC read $", read.name, ", which holds -arch=native"));
    }
  }
  ObservedCompile compile;
  compile.dirs = &dirs;
  compile.env = &env;
  compile.in_process = true;
  compile.keyed_libraries = {kNvrtcDriverLibrary};
  return ObservedManifest(record, compile, digests, compiled_from, reason);
}

}  // namespace kcache::objects
