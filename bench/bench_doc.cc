#include "bench/bench_doc.h"

#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kcache::bench {

absl::Status ReplaceSection(const std::string& path, const std::string& name,
                            const std::string& body) {
  std::string text;
  if (std::ifstream in(path); in) {
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
  } else {
    text =
        "# Benchmarks\n\nEvery figure here is printed by a benchmark under bench/; rerun it "
        "with the command under its table.\n";
  }
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  std::string open = absl::StrCat("<!-- bench:", name, " -->");
  std::string close = absl::StrCat("<!-- /bench:", name, " -->");
  std::string section = absl::StrCat(open, "\n_Measured ", date, "._ ", body, close);
  size_t begin = text.find(open);
  size_t end = text.find(close);
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    absl::StrAppend(&text, "\n## ", name, "\n\n", section, "\n");
  } else {
    text.replace(begin, end + close.size() - begin, section);
  }
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace kcache::bench
