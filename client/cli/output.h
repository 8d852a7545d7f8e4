// Formatting for the command-line tool: sizes, durations, tables, the live progress line.
#ifndef KCACHE_CLIENT_CLI_OUTPUT_H_
#define KCACHE_CLIENT_CLI_OUTPUT_H_

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/object_entry.h"

namespace kcache::cli {

std::string HumanBytes(uint64_t bytes);   // "812 B", "18.2 KiB", "4.0 MiB"
std::string HumanMicros(int64_t micros);  // "740 us", "74 ms", "5.52 s"
// An architecture number (86 = SM 8.6) as "8.6"; 0 (no bound) as "-" (JSON fields).
std::string ArchText(int arch);
// A kernel's declared arch range for a table: "any", "8.9+", "up to 9.0", "8.0-9.0".
std::string ArchRangeText(int min_arch, int max_arch);
// The toolkit versions of artifacts for a table, from their toolkit ids
// ("nvrtc-13.0+9ca007cdb201"): distinct, sorted, e.g. "12.9,13.0"; "-" when none.
std::string ToolkitVersionsText(const std::vector<std::string>& toolkit_ids);

// A plain-text table: columns padded to their widest cell; first row is the header.
// Columns whose index is in `right_aligned` are right-aligned (numbers).
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<size_t> right_aligned = {});
  void AddRow(std::vector<std::string> row);
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> right_aligned_;
};

// The compiler launchers' outputs and NVRTC outcomes (docs/torch-extensions.md,
// docs/nvrtc-standin.md) as `kcache ls` prints them after the kernels: a row per entry and a
// count; nothing when there are none. "put by" is ObjectEntry::put_by ("-" when not recorded).
void PrintObjects(const std::vector<ObjectEntry>& entries);
// The element `kcache ls --json` prints for each of them, after the kernels': its source as
// "name" and, under "compiler_output", its command key, entry id, header count, bytes and who
// put it ("put_by", "" when not recorded).
nlohmann::json ObjectJson(const ObjectEntry& entry);

// A status line redrawn in place when `out` is a terminal; silent otherwise.
class LiveLine {
 public:
  explicit LiveLine(FILE* out);
  bool enabled() const { return enabled_; }
  void Show(absl::string_view text);  // replaces the line
  void Clear();                       // erases it (before printing a normal line)

 private:
  FILE* out_;
  bool enabled_;
  bool shown_ = false;
};

// Prints "kcache: error: <message>" to stderr. Returns `exit_code` for `return Fail(...)`.
int Fail(absl::string_view message, int exit_code = 1);

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // the work failed (compile error, not found, ...)
inline constexpr int kExitBadInput = 2;  // bad flags, manifest, target or store path

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_OUTPUT_H_
