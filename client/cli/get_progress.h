// GetProgress: the lines `kcache get --server` prints to stderr while kcached compiles what it
// asked for ("kcached: softmax for 8.9: queued behind 2 compiles (4.0 s)"), from the progress
// the daemon sends (client::CallOptions::on_progress).
#ifndef KCACHE_CLIENT_CLI_GET_PROGRESS_H_
#define KCACHE_CLIENT_CLI_GET_PROGRESS_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "kcache/kcache.h"

namespace kcache::cli {

// One line (without "kcached: " and the newline) for `kernel` on `device`.
std::string DescribeProgress(const std::string& kernel, const std::string& device,
                             const client::CompileProgress& progress);

// Prints DescribeProgress lines to `out`, at most one a second for each kernel. Not
// thread-safe: one call's progress comes on one thread.
class GetProgress {
 public:
  // `kernels[i]` names the batch's kernel i.
  GetProgress(FILE* out, std::vector<std::string> kernels, std::string device)
      : out_(out), kernels_(std::move(kernels)), device_(std::move(device)) {}
  void Print(const client::CompileProgress& progress);

 private:
  FILE* out_;
  std::vector<std::string> kernels_;
  std::string device_;
  std::vector<absl::Time> printed_;  // per kernel: the last line's time
};

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_GET_PROGRESS_H_
