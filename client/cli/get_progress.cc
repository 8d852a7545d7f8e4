// GetProgress: one line per kernel at most once a second, in the words of the stage.
#include "client/cli/get_progress.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/output.h"

namespace kcache::cli {
namespace {

std::string Human(absl::Duration d) { return HumanMicros(absl::ToInt64Microseconds(d)); }

}  // namespace

std::string DescribeProgress(const std::string& kernel, const std::string& device,
                             const client::CompileProgress& progress) {
  using Stage = client::CompileProgress::Stage;
  std::string where;
  switch (progress.stage) {
    case Stage::kQueued:
      where = absl::StrCat("queued behind ", progress.queued_behind,
                           progress.queued_behind == 1 ? " compile (" : " compiles (",
                           Human(progress.elapsed), ")");
      break;
    case Stage::kCompiling:
      where = absl::StrCat("compiling (", Human(progress.compiling_for),
                           progress.expected > absl::ZeroDuration()
                               ? absl::StrCat(" of about ", Human(progress.expected))
                               : "",
                           ")");
      break;
    case Stage::kShared:
      where = absl::StrCat(
          "fetching from the shared tier, or waiting for the daemon that "
          "compiles it (",
          Human(progress.elapsed), ")");
      break;
    case Stage::kUnknown:
      where = absl::StrCat("waiting for a compile (", Human(progress.elapsed), ")");
      break;
  }
  return absl::StrCat(kernel, " for ", device, ": ", where);
}

void GetProgress::Print(const client::CompileProgress& progress) {
  if (progress.index >= kernels_.size()) return;
  // The daemon's first word comes before it knows where the compile is: wait for a better one.
  bool early = progress.stage == client::CompileProgress::Stage::kUnknown &&
               progress.elapsed < absl::Seconds(1);
  if (early) return;
  printed_.resize(kernels_.size(), absl::InfinitePast());
  absl::Time now = absl::Now();
  if (now - printed_[progress.index] < absl::Seconds(1)) return;
  printed_[progress.index] = now;
  std::fprintf(out_, "kcached: %s\n",
               DescribeProgress(kernels_[progress.index], device_, progress).c_str());
  std::fflush(out_);
}

}  // namespace kcache::cli
