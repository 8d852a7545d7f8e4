#include "client/cli/output.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kcache::cli {

std::string ArchText(int arch) {
  return arch ? absl::StrCat(arch / 10, ".", arch % 10) : std::string("-");
}

std::string ToolkitVersionsText(const std::vector<std::string>& toolkit_ids) {
  std::set<std::string> versions;
  for (const std::string& id : toolkit_ids) {
    std::string version = id.substr(0, id.find('+'));
    if (version.rfind("nvrtc-", 0) == 0) version = version.substr(6);
    versions.insert(version);
  }
  return versions.empty() ? "-" : absl::StrJoin(versions, ",");
}

std::string ArchRangeText(int min_arch, int max_arch) {
  if (min_arch == 0 && max_arch == 0) return "any";
  if (max_arch == 0) return absl::StrCat(ArchText(min_arch), "+");
  if (min_arch == 0) return absl::StrCat("up to ", ArchText(max_arch));
  return absl::StrCat(ArchText(min_arch), "-", ArchText(max_arch));
}

void PrintObjects(const std::vector<ObjectEntry>& entries) {
  if (entries.empty()) return;
  Table table({"compiler output of", "key", "entry", "headers", "bytes", "put by"}, {3, 4});
  for (const ObjectEntry& entry : entries) {
    table.AddRow({entry.source, entry.key.command.ShortHex(), entry.key.entry_id.substr(0, 12),
                  absl::StrCat(entry.manifest.size()), HumanBytes(entry.size),
                  entry.put_by.empty() ? "-" : entry.put_by});
  }
  std::printf("\n%s%zu compiler outputs\n", table.Render().c_str(), entries.size());
}

nlohmann::json ObjectJson(const ObjectEntry& entry) {
  return {{"name", entry.source},
          {"compiler_output",
           {{"key", entry.key.command.Hex()},
            {"entry", entry.key.entry_id},
            {"headers", entry.manifest.size()},
            {"size", entry.size},
            {"put_by", entry.put_by}}}};
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  for (const char* unit : {"KiB", "MiB", "GiB"}) {
    if (value < 1024 || absl::string_view(unit) == "GiB") {
      return absl::StrFormat("%.1f %s", value, unit);
    }
    value /= 1024;
  }
  return "";
}

std::string HumanMicros(int64_t micros) {
  if (micros < 1000) return absl::StrCat(micros, " us");
  if (micros < 10'000) return absl::StrFormat("%.1f ms", micros / 1e3);
  if (micros < 1'000'000) return absl::StrCat(micros / 1000, " ms");
  return absl::StrFormat("%.2f s", micros / 1e6);
}

Table::Table(std::vector<std::string> header, std::vector<size_t> right_aligned)
    : right_aligned_(std::move(right_aligned)) {
  rows_.push_back(std::move(header));
}

void Table::AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

std::string Table::Render() const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::set<size_t> right(right_aligned_.begin(), right_aligned_.end());
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      std::string pad(widths[i] - row[i].size(), ' ');
      absl::StrAppend(&line, i ? "  " : "", right.count(i) ? pad + row[i] : row[i] + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

LiveLine::LiveLine(FILE* out) : out_(out), enabled_(isatty(fileno(out)) != 0) {}

void LiveLine::Show(absl::string_view text) {
  if (!enabled_) return;
  std::fprintf(out_, "\r\033[K%.*s", static_cast<int>(text.size()), text.data());
  std::fflush(out_);
  shown_ = true;
}

void LiveLine::Clear() {
  if (!enabled_ || !shown_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  shown_ = false;
}

int Fail(absl::string_view message, int exit_code) {
  std::fprintf(stderr, "kcache: error: %.*s\n", static_cast<int>(message.size()), message.data());
  return exit_code;
}

}  // namespace kcache::cli
