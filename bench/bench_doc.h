// Keeps docs/BENCHMARKS.md up to date: each benchmark owns one section between markers.
#ifndef KCACHE_BENCH_BENCH_DOC_H_
#define KCACHE_BENCH_BENCH_DOC_H_

#include <string>

#include "absl/status/status.h"

namespace kcache::bench {

// Replaces the text between "<!-- bench:NAME -->" and "<!-- /bench:NAME -->" in `path` with
// `body` (appending a "## NAME" section with the markers if absent), with today's date.
absl::Status ReplaceSection(const std::string& path, const std::string& name,
                            const std::string& body);

}  // namespace kcache::bench

#endif  // KCACHE_BENCH_BENCH_DOC_H_
