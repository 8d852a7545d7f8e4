#include "client/cli/nvrtc_any_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <optional>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/cli/nvrtc_recompile.h"
#include "core/file_io.h"
#include "engine/keys/file_digests.h"
#include "engine/keys/macro_reach.h"
#include "engine/objects/object_bundle.h"

namespace kcache::cli {
namespace {

namespace fs = std::filesystem;

using objects::NvrtcOutcome;
using objects::NvrtcOutput;

// Whether a manifest's fact is a file's content digest (a text the compile read): hex digits,
// after the mark that it resolves to itself.
bool IsContentDigest(absl::string_view fact) {
  absl::ConsumePrefix(&fact, objects::kResolvesToItselfMark);
  return fact.size() == objects::kDigestHexDigits &&
         fact.find_first_not_of("0123456789abcdef") == absl::string_view::npos;
}

// Whether any output or lowered name of `outcome` holds `text`.
bool Holds(const NvrtcOutcome& outcome, const std::string& text) {
  for (const NvrtcOutput& output : outcome.outputs) {
    if (output.bytes.find(text) != std::string::npos) return true;
  }
  for (const auto& [result, name] : outcome.lowered) {
    if (name.find(text) != std::string::npos) return true;
  }
  return false;
}

// NVRTC's outcome for `program` compiled by the NVRTC at `context.library` in context.cwd, its
// name moved to `directory` in `state` (made, and removed after).
absl::StatusOr<objects::NvrtcOutcome> CompileInAnotherDirectory(
    const objects::NvrtcProgram& program, const objects::NvrtcContext& context,
    const objects::NvrtcNameDirectory& name, objects::NvrtcDirectoryState state,
    const std::string& directory) {
  if (state.name_exists && !state.directory_exists) {
    return absl::FailedPreconditionError("the name existed in a directory that did not");
  }
  if (chdir(context.cwd.c_str()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot enter the compile's directory ", context.cwd));
  }
  objects::NvrtcProgram moved = program;
  moved.name = absl::StrCat(directory, "/", name.base);
  absl::Cleanup remove = [&] {
    std::error_code ec;
    fs::remove_all(directory, ec);
  };
  std::error_code made;
  fs::create_directories(fs::path(directory).parent_path(), made);
  if (made) return absl::FailedPreconditionError(absl::StrCat("cannot make ", directory));
  if (state.directory_exists && mkdir(directory.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot make ", directory));
  }
  if (state.name_exists) {
    int fd = open(moved.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot make ", moved.name));
    close(fd);
  }
  return RecompileNvrtc(moved, context.library);
}

// The directories a program's name is moved to, under `top`, for a directory of `original`
// characters.
std::vector<std::string> ProbeDirectories(const std::string& top, size_t original) {
  // "/tmp/kcache-nvrtc-XXXXXX/" and one character: shorter than any directory but "/" and a
  // few under it; and one as long again as the original and 40 more, of other characters, in
  // components a file system takes.
  std::string shorter = absl::StrCat(top, "/p");
  if (shorter.size() == original) shorter += "q";
  std::string longer = top;
  for (size_t length = top.size(); length < 2 * original + 40;) {
    size_t component = std::min<size_t>(100, 2 * original + 40 - length);
    absl::StrAppend(&longer, "/", std::string(component, 'Q'));
    length += component + 1;
  }
  return {shorter, longer};
}

// Why `program` (its texts, and the files its manifest says it read) could expand a macro that
// holds its name (objects::kNvrtcPathMacros), or nullopt when it cannot.
std::optional<std::string> PathMacroReached(const objects::NvrtcProgram& program,
                                            const HeaderManifest& manifest,
                                            const objects::NvrtcContext& context) {
  objects::MacroReach reach(std::vector<std::string>(std::begin(objects::kNvrtcPathMacros),
                                                     std::end(objects::kNvrtcPathMacros)),
                            objects::TrigraphsOn(program.options));
  reach.Add(program.source);
  for (const auto& [include_name, content] : program.headers) reach.Add(content);
  for (const std::string& option : program.options) reach.Add(option);
  for (const std::string& expression : program.name_expressions) reach.Add(expression);
  const objects::BaseDirs dirs = objects::NvrtcDirs(context);
  for (const auto& [path, fact] : manifest) {
    if (!IsContentDigest(fact)) continue;
    std::string resolved = dirs.Resolve(path);
    absl::StatusOr<std::string> text = ReadWholeFile(resolved);
    if (!text.ok()) return absl::StrCat(resolved, " cannot be read again");
    reach.Add(*text);
    if (std::optional<std::string> why = reach.Reached()) {
      return absl::StrCat(*why, " (", resolved, ")");
    }
  }
  return reach.Reached();
}

}  // namespace

absl::StatusOr<ObjectEntry> AnyDirectoryEntry(const ObjectEntry& entry,
                                              const objects::NvrtcOutcome& outcome,
                                              const objects::NvrtcProgram& program,
                                              const objects::NvrtcContext& context) {
  std::optional<objects::NvrtcNameDirectory> name =
      objects::NvrtcNameDirectoryOf(program.name, context.cwd);
  if (!name) return absl::FailedPreconditionError("the program's name has no directory");
  absl::StatusOr<std::pair<HeaderManifest, objects::NvrtcDirectoryState>> manifest =
      objects::NvrtcAnyDirectoryManifest(entry.manifest, context, *name);
  if (!manifest.ok()) return manifest.status();
  std::string as_given = program.name.substr(0, program.name.size() - name->base.size());
  if (Holds(outcome, name->directory) || Holds(outcome, as_given)) {
    return absl::FailedPreconditionError("NVRTC's output names the program's directory");
  }
  if (std::optional<std::string> reached = PathMacroReached(program, entry.manifest, context)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the program could see its name: it ", *reached));
  }
  // Compiled in directories of kcache's choosing, of other lengths and characters than the
  // original's (never under the caller's $TMPDIR), NVRTC must give the same outcome: what it
  // writes of the name itself (LTO-IR, line info) then does not reach the output.
  std::string top = "/tmp/kcache-nvrtc-XXXXXX";
  if (mkdtemp(top.data()) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cannot make a directory like ", top));
  }
  absl::Cleanup remove_top = [&] {
    std::error_code ec;
    fs::remove_all(top, ec);
  };
  for (const std::string& directory : ProbeDirectories(top, name->directory.size())) {
    absl::StatusOr<NvrtcOutcome> elsewhere =
        CompileInAnotherDirectory(program, context, *name, manifest->second, directory);
    if (!elsewhere.ok()) return elsewhere.status();
    if (*elsewhere != outcome) {
      return absl::FailedPreconditionError(
          absl::StrCat("compiled in another directory (", directory.size(),
                       " characters), NVRTC gave another output: the directory reaches it"));
    }
  }
  objects::ObjectKey key = objects::NvrtcAnyDirectoryKey(
      objects::ObjectKey{entry.key.command, entry.fields, entry.source}, *name);
  ObjectEntry moved;
  moved.manifest = std::move(manifest->first);
  moved.key = ObjectEntryKey::Of(key.key1, moved.manifest);
  moved.source = key.source;
  moved.fields = key.fields;
  moved.size = entry.size;
  return moved;
}

}  // namespace kcache::cli
