#include "engine/keys/macro_reach.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kcache::objects {
namespace {

bool IsIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// `text` after translation phases 1 and 2 as NVRTC's front end runs them: "??/" is a backslash
// where trigraphs are on (a standard before C++17), and a backslash before a newline (or CR LF)
// joins the two lines.
std::string Spliced(absl::string_view text, bool trigraphs) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    size_t backslash = 0;  // the length of a backslash here: 1, 3 ("??/") or none
    if (text[i] == '\\') {
      backslash = 1;
    } else if (trigraphs && absl::StartsWith(text.substr(i), "?\?/")) {
      backslash = 3;
    }
    if (backslash != 0) {
      size_t next = i + backslash;
      if (next < text.size() && text[next] == '\n') {
        i = next;
        continue;
      }
      if (next + 1 < text.size() && text[next] == '\r' && text[next + 1] == '\n') {
        i = next + 1;
        continue;
      }
      out.push_back('\\');
      i = next - 1;
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

// The end of a quoted literal opened at `i` (the quote), escapes skipped; an unterminated one
// ends at the line's end, as a lexer ends it.
size_t QuotedEnd(absl::string_view text, size_t i) {
  char quote = text[i];
  for (size_t j = i + 1; j < text.size(); ++j) {
    if (text[j] == '\\') {
      ++j;
    } else if (text[j] == quote || text[j] == '\n') {
      return j + 1;
    }
  }
  return text.size();
}

}  // namespace

MacroReach::MacroReach(std::vector<std::string> names, bool trigraphs)
    : names_(std::move(names)), trigraphs_(trigraphs) {}

void MacroReach::Identifier(absl::string_view identifier) {
  for (const std::string& name : names_) {
    if (identifier == name) {
      if (!spelled_) spelled_ = name;
    } else if (absl::StrContains(name, identifier)) {
      pieces_.emplace(identifier);
    }
  }
}

void MacroReach::AddWords(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (!IsIdentifierChar(text[i])) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && IsIdentifierChar(text[i])) ++i;
    Identifier(text.substr(start, i - start));
  }
}

void MacroReach::Add(absl::string_view raw) {
  const std::string text = Spliced(raw, trigraphs_);
  // A raw string keeps its text as written (no splices, no comments): rather than lex one, every
  // word of a text that may hold one counts, its comments' too.
  if (absl::StrContains(text, "R\"")) {
    AddWords(text);
    return;
  }
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      size_t end = text.find('\n', i);
      i = end == std::string::npos ? n : end;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? n : end + 2;
    } else if ((c == '"' || c == '\'')) {
      // A literal's words count too: _Pragma makes a string's content tokens again.
      size_t end = QuotedEnd(text, i);
      AddWords(absl::string_view(text).substr(i + 1, end - i - 1));
      i = end;
    } else if (IsDigit(c) || (c == '.' && i + 1 < n && IsDigit(text[i + 1]))) {
      // A pp-number ("0x1f", "1e+5", "1'000"): no identifier, and no paste makes one from it.
      ++i;
      while (i < n) {
        char d = text[i];
        bool sign = (d == '+' || d == '-') && (text[i - 1] == 'e' || text[i - 1] == 'E' ||
                                               text[i - 1] == 'p' || text[i - 1] == 'P');
        bool separator = d == '\'' && i + 1 < n && IsIdentifierChar(text[i + 1]);
        if (!IsIdentifierChar(d) && d != '.' && !sign && !separator) break;
        ++i;
      }
    } else if (IsIdentifierChar(c)) {
      size_t start = i;
      while (i < n && IsIdentifierChar(text[i])) ++i;
      Identifier(absl::string_view(text).substr(start, i - start));
    } else {
      ++i;
    }
  }
}

std::optional<std::string> MacroReach::Reached() const {
  if (spelled_) return absl::StrCat("spells ", *spelled_);
  for (const std::string& name : names_) {
    // from[j]: the pieces that join into name[0, j), or nothing when none do.
    std::vector<std::optional<std::vector<std::string>>> from(name.size() + 1);
    from[0].emplace();
    for (size_t i = 0; i < name.size(); ++i) {
      if (!from[i]) continue;
      for (size_t j = i + 1; j <= name.size(); ++j) {
        if (from[j] || j - i == name.size()) continue;
        std::string piece = name.substr(i, j - i);
        if (!pieces_.contains(piece)) continue;
        from[j] = from[i];
        from[j]->push_back(std::move(piece));
      }
    }
    if (from[name.size()]) {
      return absl::StrCat("could paste ", name, " from ", absl::StrJoin(*from[name.size()], " + "));
    }
  }
  return std::nullopt;
}

bool TrigraphsOn(const std::vector<std::string>& options) {
  for (size_t i = 0; i < options.size(); ++i) {
    absl::string_view option = options[i];
    absl::string_view standard;
    for (absl::string_view flag : {"-std=", "--std="}) {
      if (absl::StartsWith(option, flag)) standard = option.substr(flag.size());
    }
    if ((option == "-std" || option == "--std") && i + 1 < options.size()) {
      standard = options[i + 1];
    }
    if (standard == "c++03" || standard == "c++11" || standard == "c++14") return true;
  }
  return false;
}

}  // namespace kcache::objects
