// Whether a program could expand a macro of a given name, judged from the texts it is made of
// (its source, its headers in memory and on disk, its options, its name expressions), without
// preprocessing them: the test that lets kcache's NVRTC stand-in prove a compile's output does
// not depend on its program's path (docs/nvrtc-standin.md, "Programs named in a directory").
//
// A preprocessor expands a macro where an identifier token equal to its name appears, and such
// a token comes from the text as written (after line splices, "??/" included) or from pasting
// two tokens with ## (directly, or through a macro of NVRTC's own builtin headers, which always
// offer one: _NV_CONCAT_EVAL1). Pasting joins identifiers that were themselves written
// somewhere, so a name can be formed only from pieces each written whole as an identifier in
// some text. MacroReach is conservative in both: identifiers inside comments are skipped, but
// those inside string literals and disabled #if blocks count, and any pasting is taken as
// possible wherever the pieces come from.
#ifndef KCACHE_ENGINE_KEYS_MACRO_REACH_H_
#define KCACHE_ENGINE_KEYS_MACRO_REACH_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace kcache::objects {

// The names through which an NVRTC program sees its own name: __FILE__ and __BASE_FILE__, and
// assert, which NVRTC's builtin headers define with __FILE__ (its expansion can be stringized,
// and its length taken).
inline constexpr absl::string_view kNvrtcPathMacros[] = {"__FILE__", "__BASE_FILE__", "assert"};

// Not thread-safe. Add every text, then ask Reached.
class MacroReach {
 public:
  // `trigraphs`: whether the compile reads "??/" as a backslash (TrigraphsOn).
  MacroReach(std::vector<std::string> names, bool trigraphs);

  // The identifiers of `text`, tokenized as a C preprocessor's first three phases would
  // (trigraph "??/" and backslash-newline splices removed, comments skipped; the words of string
  // literals count, since _Pragma makes tokens of them again; in a text with a raw string,
  // every word counts), the names and their pieces remembered.
  void Add(absl::string_view text);

  // Why a program made of the texts added could expand one of the names: "spells NAME", or
  // "could paste NAME from A + B + ..."; nullopt when it cannot.
  std::optional<std::string> Reached() const;

 private:
  void Identifier(absl::string_view identifier);
  void AddWords(absl::string_view text);  // every identifier-like word, nothing skipped

  std::vector<std::string> names_;
  absl::flat_hash_set<std::string> pieces_;  // identifiers seen that are part of a name
  std::optional<std::string> spelled_;       // a name seen whole
  bool trigraphs_;
};

// Whether NVRTC options ask for a standard with trigraphs (before C++17; NVRTC's default is
// C++17, without).
bool TrigraphsOn(const std::vector<std::string>& options);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_MACRO_REACH_H_
