// Make-style dependency files: parsing and writing.
#include "engine/keys/dep_file.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace kcache::objects {

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

}  // namespace kcache::objects
