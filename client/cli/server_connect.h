// How the tool talks to kcached: a libkcache client that never compiles locally and never
// opens its circuit (one command, one answer), and statuses turned into exit codes.
#ifndef KCACHE_CLIENT_CLI_SERVER_CONNECT_H_
#define KCACHE_CLIENT_CLI_SERVER_CONNECT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kcache/kcache.h"

namespace kcache::cli {

absl::StatusOr<std::unique_ptr<client::Client>> ConnectForCli(const std::string& server,
                                                              double timeout_s);

// Prints the status's message; exit 2 for InvalidArgument (bad input), else 1.
int FailStatus(const absl::Status& status);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_SERVER_CONNECT_H_
