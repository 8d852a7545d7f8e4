#include "engine/objects/nvrtc_compile.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/library_build.h"
#include "core/xxh128.h"
#include "engine/objects/object_bundle.h"
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

constexpr absl::string_view kOutcomeMagic = "kcache.nvrtc-outcome.v1\n";

void AppendU32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void AppendU64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Reads the outcome's fields in order, each bounds-checked.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  bool U32(uint32_t* value) {
    if (rest_.size() < 4) return false;
    *value = 0;
    for (int i = 0; i < 4; ++i) *value |= uint32_t{static_cast<uint8_t>(rest_[i])} << (8 * i);
    rest_.remove_prefix(4);
    return true;
  }
  bool I32(int* value) {
    uint32_t raw = 0;
    if (!U32(&raw)) return false;
    *value = static_cast<int>(raw);
    return true;
  }
  bool U64(uint64_t* value) {
    if (rest_.size() < 8) return false;
    *value = 0;
    for (int i = 0; i < 8; ++i) *value |= uint64_t{static_cast<uint8_t>(rest_[i])} << (8 * i);
    rest_.remove_prefix(8);
    return true;
  }
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

std::string EncodeNvrtcOutcome(const NvrtcOutcome& outcome) {
  std::string out(kOutcomeMagic);
  AppendU32(out, static_cast<uint32_t>(outcome.result));
  for (const NvrtcOutput& output : outcome.outputs) {
    AppendU32(out, static_cast<uint32_t>(output.size_result));
    AppendU64(out, output.size);
    AppendU32(out, static_cast<uint32_t>(output.result));
    PutFramed(out, output.bytes);
  }
  AppendU32(out, static_cast<uint32_t>(outcome.lowered.size()));
  for (const auto& [result, name] : outcome.lowered) {
    AppendU32(out, static_cast<uint32_t>(result));
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
