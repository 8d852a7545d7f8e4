#include "engine/objects/precompiled_headers.h"

#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/file_io.h"
#include "engine/objects/run_process.h"

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

// The compiler's own include directories: the lines between "search starts here:" and
// "End of search list." in `-E -v` of an empty C++ source.
std::vector<std::string> CompilerIncludeDirs(const std::string& compiler) {
  std::vector<std::string> dirs;
  absl::StatusOr<ProcessResult> run =
      RunCaptured({compiler, "-E", "-v", "-x", "c++", "/dev/null", "-o", "/dev/null"});
  if (!run.ok()) return dirs;
  bool listing = false;
  for (absl::string_view line : absl::StrSplit(run->stderr_text, '\n')) {
    if (absl::StrContains(line, "search starts here:")) {
      listing = true;
    } else if (absl::StartsWith(line, "End of search list.")) {
      listing = false;
    } else if (listing) {
      dirs.emplace_back(absl::StripAsciiWhitespace(line));
    }
  }
  return dirs;
}

}  // namespace

std::vector<std::string> IncludedNames(const std::string& source_text) {
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(source_text, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "#")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "include")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty()) continue;
    char close = line[0] == '"' ? '"' : line[0] == '<' ? '>' : '\0';
    if (close == '\0') continue;
    size_t end = line.find(close, 1);
    if (end != absl::string_view::npos && end > 1) names.emplace_back(line.substr(1, end - 1));
  }
  return names;
}

absl::StatusOr<std::vector<std::string>> PrecompiledHeaders(const CompilerCommand& command,
                                                            const std::string& compiler,
                                                            const std::string& cwd,
                                                            const Environment& env) {
  auto absolute = [&](const std::string& path) {
    return (path.empty() || path[0] != '/' ? fs::path(cwd) / path : fs::path(path))
        .lexically_normal();
  };
  fs::path source = absolute(command.source);
  std::vector<std::string> names;
  std::vector<fs::path> dirs = {source.parent_path(), fs::path(cwd)};
  const std::vector<std::string>& args = command.args;
  for (size_t i = 0; i < args.size(); ++i) {
    for (const char* option : {"-include", "-I", "-iquote", "-isystem", "-idirafter"}) {
      absl::string_view arg = args[i];
      if (!absl::ConsumePrefix(&arg, option)) continue;
      std::string value(arg);
      if (value.empty() && i + 1 < args.size()) value = args[i + 1];
      if (value.empty()) continue;
      if (std::string(option) == "-include") {
        if (arg.empty()) names.push_back(value);  // -include takes its file only apart
      } else {
        dirs.push_back(absolute(value));
      }
    }
  }
  for (const char* name : {"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"}) {
    auto it = env.find(name);
    if (it == env.end()) continue;
    for (absl::string_view dir : absl::StrSplit(it->second, ':', absl::SkipEmpty())) {
      dirs.push_back(absolute(std::string(dir)));
    }
  }
  for (const std::string& dir : CompilerIncludeDirs(compiler)) dirs.push_back(absolute(dir));
  absl::StatusOr<std::string> text = ReadWholeFile(source.string());
  if (text.ok()) {
    for (std::string& name : IncludedNames(*text)) names.push_back(std::move(name));
  }
  fs::path output = absolute(command.output);  // a header's own precompiled output
  std::vector<std::string> found;
  std::set<fs::path> seen;
  for (const std::string& name : names) {
    std::vector<fs::path> places;
    if (name[0] == '/') {
      places.emplace_back(name);
    } else {
      for (const fs::path& dir : dirs) places.push_back(dir / name);
      if (absl::StartsWith(name, ".")) places.push_back(absolute(name));  // -include ./x.h
    }
    for (const fs::path& place : places) {
      for (const char* suffix : {".gch", ".pch"}) {
        fs::path candidate = fs::path(absl::StrCat(place.lexically_normal().string(), suffix));
        if (candidate == output || !seen.insert(candidate).second) continue;
        std::error_code ec;
        fs::file_status status = fs::status(candidate, ec);
        if (fs::is_directory(status)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "a directory of precompiled headers, ", candidate.string(), ", may have been read"));
        }
        if (fs::exists(status)) found.push_back(candidate.string());
      }
    }
  }
  return found;
}

}  // namespace kcache::objects
