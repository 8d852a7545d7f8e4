// kcached's --redis-* flags.
#include "daemon/host/redis_door_flags.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/host/listen_socket.h"
#include "daemon/host/size_flags.h"

namespace kcache {

void AddRedisDoorFlags(CLI::App& app, RedisDoorOptions& options, RedisDoorFlags& flags) {
  app.add_option("--redis-listen", options.listen,
                 "Serve the Redis-protocol door for torch.compile and Triton caches on "
                 "unix:///PATH (who may use it: --redis-socket-mode) or IPV4:PORT (every local "
                 "user may read and write it) (docs/torch-compile.md); unset: off");
  app.add_option("--redis-namespaces", flags.namespaces,
                 "Comma-separated key prefixes the door serves (a key is NAMESPACE:...)")
      ->capture_default_str();
  AddSizeFlag(app, "--redis-value-max-bytes,--redis-max-value-bytes",
              options.commands.max_value_bytes,
              "Largest value a SET may store through the door (e.g. 32MiB); larger: refused");
  app.add_option("--redis-socket-mode", flags.socket_mode,
                 "Permissions of the door's unix socket (octal): 0600 its owner only, 0660 "
                 "its group too")
      ->capture_default_str();
  AddSizeFlag(app, "--redis-key-max-bytes,--redis-max-key-bytes", options.commands.max_key_bytes,
              "Longest key a door command may name (e.g. 16KiB); longer: refused");
  AddSizeFlag(app, "--redis-buffer-max-bytes,--redis-max-buffer-bytes", options.max_buffer_bytes,
              "Unanswered input plus unsent replies one door connection may hold");
  AddSizeFlag(app, "--redis-total-max-bytes,--redis-max-total-bytes", options.max_total_bytes,
              "Unanswered input plus unsent replies all door connections together may hold "
              "(e.g. 256MiB); past it replies and unfinished commands are refused");
  app.add_option("--redis-max-connections", options.max_connections,
                 "Door connections open at once; more are refused")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--redis-idle-seconds", flags.idle_seconds,
                 "A door connection silent this long is closed")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
}

absl::Status FinishRedisDoorFlags(const RedisDoorFlags& flags, RedisDoorOptions& options) {
  options.idle_timeout = absl::Seconds(flags.idle_seconds);
  absl::StatusOr<mode_t> mode = ParseSocketMode(flags.socket_mode);
  if (!mode.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis-socket-mode: ", mode.status().message()));
  }
  options.socket_mode = *mode;
  if (options.commands.max_key_bytes == 0) {
    return absl::InvalidArgumentError("--redis-key-max-bytes must be at least 1");
  }
  options.commands.namespaces.clear();
  for (absl::string_view space : absl::StrSplit(flags.namespaces, ',')) {
    if (space.empty() || space.find_first_of(": \t") != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--redis-namespaces ", flags.namespaces,
                       ": give comma-separated names without ':' or spaces, e.g. pt2,triton"));
    }
    options.commands.namespaces.emplace_back(space);
  }
  return absl::OkStatus();
}

}  // namespace kcache
