// One fatbin holding each distinct SM's cubin of a kernel (`kcache get --device 7.5,8.6
// --fatbin`): a single context-independent image that every GPU of a mixed node loads, each
// taking the cubin of its own SM. Built with the CUDA toolkit's `fatbinary` tool.
#ifndef KCACHE_CLIENT_CLI_MIXED_FATBIN_H_
#define KCACHE_CLIENT_CLI_MIXED_FATBIN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kcache::cli {

struct SmCubin {
  int arch = 0;       // 75, 86, ...
  std::string cubin;  // the ELF bytes
};

// The fatbin of `cubins` (one per distinct SM), built by `<toolkit_root>/bin/fatbinary` ("" =
// $CUDA_HOME, else /usr/local/cuda) in a temporary directory it removes. FailedPrecondition when
// the toolkit has no fatbinary; Internal with its output when it fails; InvalidArgument for an
// empty list.
absl::StatusOr<std::string> BuildFatbin(const std::string& toolkit_root,
                                        const std::vector<SmCubin>& cubins);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_MIXED_FATBIN_H_
