// Base directories: writing paths relative to them, and back.
#include "engine/keys/base_dirs.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace kcache::objects {
namespace {

bool IsBoundary(const std::string& text, size_t pos) {
  if (pos >= text.size()) return true;
  char c = text[pos];
  return c == '/' || c == ' ' || c == ':' || c == '\'' || c == '"' || c == ',' || c == '=' ||
         c == ';' || c == ')' || c == '\n' || c == '\t';
}

std::string Token(size_t index) { return index == 0 ? "@cwd@" : absl::StrCat("@base", index, "@"); }
constexpr char kShimsToken[] = "@shims@";

}  // namespace

std::string BaseDirs::Normalize(const std::string& text) const {
  std::vector<std::pair<std::string, std::string>> order;  // (dir, token), longest first
  order.emplace_back(cwd, Token(0));
  for (size_t i = 0; i < roots.size(); ++i) order.emplace_back(roots[i], Token(i + 1));
  order.emplace_back(shims, kShimsToken);
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
  if (!shims.empty()) replacements.emplace_back(kShimsToken, shims);
  return absl::StrReplaceAll(text, replacements);
}

std::string BaseDirs::Resolve(const std::string& path) const {
  std::string restored = Restore(path);
  if (!restored.empty() && restored[0] == '/') return restored;
  return absl::StrCat(cwd, "/", restored);
}

std::string NormalBaseDir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/') return "";
  std::string normal = std::filesystem::path(dir).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

}  // namespace kcache::objects
