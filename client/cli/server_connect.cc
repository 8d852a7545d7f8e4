#include "client/cli/server_connect.h"

#include "absl/strings/str_cat.h"
#include "client/cli/output.h"

namespace kcache::cli {

absl::StatusOr<std::unique_ptr<client::Client>> ConnectForCli(const std::string& server,
                                                              double timeout_s) {
  client::ClientOptions options;
  options.address = server;
  options.deadline = absl::Seconds(timeout_s);
  options.local_compile_fallback = false;
  options.breaker_failures = 0;
  options.startup_grace = absl::ZeroDuration();  // a person asked: a missing daemon says so now
  options.client_name = "kcache-cli";
  return client::Client::Connect(options);
}

int FailStatus(const absl::Status& status) {
  return Fail(status.message(),
              status.code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed);
}

}  // namespace kcache::cli
