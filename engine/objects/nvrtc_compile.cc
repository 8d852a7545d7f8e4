#include "engine/objects/nvrtc_compile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/xxh128.h"
#include "engine/objects/observed_manifest.h"

namespace kcache::objects {
namespace {

// Bumped whenever what goes into an NVRTC compile's key1 or manifest changes: old entries
// then simply miss. Never a command's domain (command_key.cc): the two never share a key.
constexpr char kNvrtcKeyDomain[] = "kcache.nvrtc.v1";

absl::Status Uncached(UncachedReason* reason, UncachedReason why, std::string message) {
  *reason = why;
  return absl::FailedPreconditionError(std::move(message));
}

}  // namespace

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
                                          FileDigests& digests, UncachedReason* reason) {
  if (NamesNativeArch(program.options)) {
    return Uncached(reason, UncachedReason::kNativeTarget,
                    "-arch=native: the GPU here decides the code, and no key says which");
  }
  if (NamesTimeMacro(program.source)) {
    return Uncached(reason, UncachedReason::kTimeMacros,
                    "the source names __DATE__, __TIME__ or __TIMESTAMP__");
  }
  for (const auto& [name, content] : program.headers) {
    if (NamesTimeMacro(content)) {
      return Uncached(reason, UncachedReason::kTimeMacros,
                      absl::StrCat("header ", name, " names __DATE__, __TIME__ or __TIMESTAMP__"));
    }
  }
  ObjectKey key;
  key.source = program.name;
  absl::StatusOr<FileDigest> library = digests.Digest(context.library, DigestKind::kTool);
  if (!library.ok()) {
    return Uncached(reason, UncachedReason::kUnreadableInput,
                    absl::StrCat("NVRTC ", context.library, ": ", library.status().message()));
  }
  key.fields.emplace_back("nvrtc", library->hex);
  key.fields.emplace_back("nvrtc version", absl::StrCat(context.major, ".", context.minor));
  if (context.driver.empty()) {
    key.fields.emplace_back("driver", "none");
  } else {
    absl::StatusOr<FileDigest> driver = digests.Digest(context.driver, DigestKind::kTool);
    if (!driver.ok()) {
      return Uncached(reason, UncachedReason::kUnreadableInput,
                      absl::StrCat("driver ", context.driver, ": ", driver.status().message()));
    }
    key.fields.emplace_back("driver", driver->hex);
  }
  key.fields.emplace_back("cwd", context.cwd);
  key.fields.emplace_back("name", program.name);
  key.fields.emplace_back("source", Xxh128Hex(program.source));
  for (const auto& [name, content] : program.headers) {
    key.fields.emplace_back("header name", name);
    key.fields.emplace_back("header", Xxh128Hex(content));
  }
  for (const std::string& option : program.options) key.fields.emplace_back("arg", option);
  for (const std::string& expression : program.name_expressions) {
    key.fields.emplace_back("name expression", expression);
  }
  key.key1 = KeyOverFields(kNvrtcKeyDomain, key.fields);
  return key;
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
