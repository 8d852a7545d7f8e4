// The C ABI's progress callback (kcache_set_progress_callback): CallOptions::on_progress of
// every resolve through the client, in C terms.
#include "client/lib/c_api_internal.h"

void kcache_set_progress_callback(kcache_client* client, kcache_progress_callback callback,
                                  void* context) {
  if (client == nullptr) return;
  if (callback == nullptr) {
    client->call.on_progress = nullptr;
    return;
  }
  client->call.on_progress = [callback, context](const kcache::client::CompileProgress& p) {
    kcache_progress progress = {};
    progress.index = p.index;
    progress.stage = static_cast<int32_t>(p.stage);
    progress.queued_behind = p.queued_behind;
    progress.elapsed_ms = absl::ToInt64Milliseconds(p.elapsed);
    progress.compiling_ms = absl::ToInt64Milliseconds(p.compiling_for);
    progress.expected_ms = absl::ToInt64Milliseconds(p.expected);
    callback(context, &progress);
  };
}
