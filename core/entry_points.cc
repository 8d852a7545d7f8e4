// Entry points of PTX text and of artifacts (cubins through core/cubin.h).
#include "core/entry_points.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/cubin.h"

namespace kcache {
namespace {

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '$' || c == '.'; }

// `ptx` with its comments replaced by spaces.
std::string WithoutComments(absl::string_view ptx) {
  std::string out(ptx);
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '/' && out[i + 1] == '/') {
      for (; i < out.size() && out[i] != '\n'; ++i) out[i] = ' ';
    } else if (out[i] == '/' && out[i + 1] == '*') {
      size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      for (; i < end; ++i) out[i] = out[i] == '\n' ? '\n' : ' ';
      --i;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> PtxEntryNames(absl::string_view ptx) {
  const std::string text = WithoutComments(ptx);
  const std::string kEntry = ".entry";
  std::vector<std::string> names;
  for (size_t at = text.find(kEntry); at != std::string::npos; at = text.find(kEntry, at + 1)) {
    size_t after = at + kEntry.size();
    bool starts_token = at == 0 || absl::ascii_isspace(text[at - 1]);
    if (!starts_token || after >= text.size() || !absl::ascii_isspace(text[after])) continue;
    while (after < text.size() && absl::ascii_isspace(text[after])) ++after;
    size_t end = after;
    while (end < text.size() && IsNameChar(text[end])) ++end;
    if (end > after) names.push_back(text.substr(after, end - after));
  }
  return names;
}

absl::StatusOr<std::vector<std::string>> EntryPointsOf(ArtifactKind kind, absl::string_view bytes) {
  switch (kind) {
    case ArtifactKind::kCubin:
      return CubinEntryNames(bytes);
    case ArtifactKind::kPtx:
      return PtxEntryNames(bytes);
    case ArtifactKind::kObject:
      return absl::InvalidArgumentError(
          "a compiler launcher's object is not a kernel: no entry points");
    case ArtifactKind::kLtoir:
      break;
  }
  return absl::InvalidArgumentError("LTO-IR has no entry points a driver can load: link it first");
}

}  // namespace kcache
