// kcache warm --server: the tool reads the manifest and sends its kernels; the daemon compiles
// into its writable store and streams a line per finished job, then its totals.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/output.h"
#include "client/cli/server_commands.h"
#include "client/cli/server_connect.h"
#include "core/manifest.h"
#include "core/target.h"
#include "kcache/kcache.h"

namespace kcache::cli {
namespace {

std::string Indent(const std::string& text) {
  std::string out = "    ";
  for (char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

// The same line the local warm prints for a finished job.
void PrintJob(const client::WarmJobEvent& e) {
  std::string width = std::to_string(e.total);
  std::string counter = absl::StrCat(
      "[", std::string(width.size() - std::min(width.size(), std::to_string(e.done).size()), ' '),
      e.done, "/", e.total, "]");
  if (e.outcome == "built" || e.outcome == "cached") {
    std::printf("%s %-7s %-28s %-9s %9s  %-16s %s\n", counter.c_str(), e.outcome.c_str(),
                e.kernel_name.c_str(), e.target.c_str(),
                HumanMicros(static_cast<int64_t>(e.micros)).c_str(),
                absl::StrJoin(e.kinds, "+").c_str(), HumanBytes(e.bytes).c_str());
  } else if (e.outcome == "skipped") {
    std::printf("%s %-7s %-28s %-9s %s\n", counter.c_str(), e.outcome.c_str(),
                e.kernel_name.c_str(), e.target.c_str(), e.message.c_str());
  } else {  // on stderr, as a store warm prints it: the NVRTC log is what a failed build shows
    std::fflush(stdout);
    std::fprintf(stderr, "%s FAILED  %-28s %-9s %9s\n%s\n", counter.c_str(), e.kernel_name.c_str(),
                 e.target.c_str(), HumanMicros(static_cast<int64_t>(e.micros)).c_str(),
                 Indent(e.message).c_str());
  }
  std::fflush(stdout);
}

struct Counts {
  int built = 0, cached = 0, skipped = 0, failed = 0;
};

void PrintTotals(const client::WarmTotals& totals, const std::vector<Target>& targets,
                 const std::map<std::string, Counts>& by_target,
                 const std::vector<std::string>& failures) {
  Table table({"target", "built", "already cached", "skipped (arch)", "failed"}, {1, 2, 3, 4});
  for (const Target& t : targets) {
    auto it = by_target.find(t.ToString());
    Counts c = it == by_target.end() ? Counts{} : it->second;
    table.AddRow({t.ToString(), std::to_string(c.built), std::to_string(c.cached),
                  std::to_string(c.skipped), std::to_string(c.failed)});
  }
  table.AddRow({"total", std::to_string(totals.built), std::to_string(totals.cached),
                std::to_string(totals.skipped), std::to_string(totals.failed)});
  std::printf("\n%s", table.Render().c_str());
  std::printf("%s in %s\n", totals.failed == 0 ? "done" : "FAILED",
              HumanMicros(static_cast<int64_t>(totals.wall_micros)).c_str());
  std::fflush(stdout);
  for (const std::string& f : failures) std::fprintf(stderr, "failed: %s (log above)\n", f.c_str());
}

}  // namespace

int RunWarmOnServer(const ServerWarmFlags& flags) {
  absl::StatusOr<std::vector<Target>> targets = ParseTargetList(flags.arch);
  if (!targets.ok())
    return Fail(absl::StrCat("--arch: ", targets.status().message()), kExitBadInput);
  absl::StatusOr<std::vector<client::KernelSource>> loaded =
      client::LoadManifestKernels(flags.manifest);
  if (!loaded.ok()) return Fail(loaded.status().message(), kExitBadInput);
  absl::StatusOr<std::unique_ptr<client::Client>> c = ConnectForCli(flags.server, 60);
  if (!c.ok()) return FailStatus(c.status());

  std::vector<client::KernelSource> kernels = *std::move(loaded);
  std::vector<std::string> target_names;
  for (const Target& t : *targets) target_names.push_back(t.ToString());
  std::printf("warming %zu kernels x %zu targets (%s) through kcached at %s\n", kernels.size(),
              targets->size(), flags.arch.c_str(), flags.server.c_str());
  std::fflush(stdout);

  std::map<std::string, Counts> by_target;
  std::vector<std::string> failures;
  absl::StatusOr<client::WarmTotals> totals = (*c)->Warm(
      kernels, target_names, flags.jobs, absl::ZeroDuration(), [&](const client::WarmJobEvent& e) {
        PrintJob(e);
        Counts& counts = by_target[e.target];
        if (e.outcome == "built") ++counts.built;
        if (e.outcome == "cached") ++counts.cached;
        if (e.outcome == "skipped") ++counts.skipped;
        if (e.outcome == "failed") {
          ++counts.failed;
          failures.push_back(absl::StrCat(e.kernel_name, " for ", e.target));
        }
      });
  if (!totals.ok()) return FailStatus(totals.status());
  PrintTotals(*totals, *targets, by_target, failures);
  return totals->failed == 0 ? kExitOk : kExitFailed;
}

}  // namespace kcache::cli
