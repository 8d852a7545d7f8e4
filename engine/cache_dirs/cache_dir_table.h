// The table of inference libraries' JIT cache directories kcache knows
// (engine/cache_dirs/cache_dirs.yaml, built in; docs/cache-dirs.md), a user's own directories
// added to it, and where each directory is for an environment.
#ifndef KCACHE_ENGINE_CACHE_DIRS_CACHE_DIR_TABLE_H_
#define KCACHE_ENGINE_CACHE_DIRS_CACHE_DIR_TABLE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache::cache_dirs {

// A process's environment, NAME -> VALUE (engine/keys/compiler_tools.h's Environment).
using Environment = std::map<std::string, std::string>;

// What a snapshot's key takes beyond the library, its version, the SMs and its variables
// (cache_dir_key.h).
enum class KeyPart { kToolkit, kTorch, kDriver, kCommandLine, kPath };

// One row of the table (cache_dirs.yaml says what each field means).
struct CacheDirSpec {
  std::string name;                        // "triton"
  std::vector<std::string> distributions;  // "triton", "pytorch-triton": the first installed
  std::vector<std::string> variables;      // "TRITON_CACHE_DIR": the first set one
  std::string default_path;                // "${TRITON_HOME:-~}/.triton/cache"
  std::string subdirectory;                // under the variable's or default's path; "" none
  std::vector<std::string> prefixes;       // "TRITON_"
  std::vector<KeyPart> keys;
  std::string misses;
  std::vector<std::string> leave_out;  // globs on paths relative to the directory
  std::vector<std::string> in_place;   // likewise
  bool at_exit = false;
  std::string served_by;
  bool user_added = false;  // from --cache-dir, not the table

  bool Keys(KeyPart part) const;
};

// The built-in table, parsed once. A table that does not parse is a build defect:
// tests/unit/cache_dir_table_test.cc parses it.
const std::vector<CacheDirSpec>& KnownCacheDirs();
// The built-in row named `name`; null when there is none.
const CacheDirSpec* FindKnownCacheDir(absl::string_view name);

// Parses a table in cache_dirs.yaml's form. InvalidArgument naming the row and field for a
// missing name, default or field of the wrong kind, an unknown key part, or a name twice.
absl::StatusOr<std::vector<CacheDirSpec>> ParseCacheDirTable(absl::string_view yaml);

// A user's directory from `--cache-dir NAME=DIR[:PREFIX,...]`: keyed as the table's rows are,
// by NAME, DIR's absolute path (its files may name it), the toolkit and torch's version, and the
// variables with the PREFIXes. InvalidArgument for an empty or table-known name, a name that is
// not [a-z0-9_-]+, or a DIR that is not absolute.
absl::StatusOr<CacheDirSpec> ParseUserCacheDir(absl::string_view flag);

// `text` with $NAME, ${NAME} and ${NAME:-fallback} (fallback expanded the same way) replaced
// from `env`, and a ~ leading the text or a fallback by $HOME. FailedPrecondition naming the
// variable for one unset (or empty) without a fallback; InvalidArgument for an unterminated ${.
absl::StatusOr<std::string> ExpandPath(absl::string_view text, const Environment& env);

// Where `spec`'s directory is in `env`: its first variable set, else its default, then its
// subdirectory; absolute and lexically normal. FailedPrecondition when it cannot be said
// (HOME unset, a relative result).
absl::StatusOr<std::string> ResolveCacheDir(const CacheDirSpec& spec, const Environment& env);

// Whether `relative` (a path under the directory, '/'-separated) is one of `spec`'s leave_out
// files (fnmatch, '*' matching '/' too).
bool LeftOut(const CacheDirSpec& spec, absl::string_view relative);

absl::string_view KeyPartName(KeyPart part);  // "toolkit", "torch", ...

}  // namespace kcache::cache_dirs

#endif  // KCACHE_ENGINE_CACHE_DIRS_CACHE_DIR_TABLE_H_
