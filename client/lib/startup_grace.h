// StartupGrace: how long a client waits for a kcached that is not there yet (its socket
// missing or refusing: a sidecar still starting) before it compiles locally. Spent once per
// client: it ends at the first contact with the daemon, or when it has run out, whichever
// comes first; after that the circuit breaker alone decides (docs/client.md, "Waiting for the
// sidecar"). Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_STARTUP_GRACE_H_
#define KCACHE_CLIENT_LIB_STARTUP_GRACE_H_

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kcache::client {

// Thread-safe.
class StartupGrace {
 public:
  explicit StartupGrace(absl::Duration grace)
      : grace_(grace), over_(grace <= absl::ZeroDuration()) {}

  // The daemon answered (or took a call): the grace is over.
  void Contacted();
  // After a call found no daemon (nothing listening: the socket missing, or the connection
  // refused): true, after a short pause, when the call should try again because the grace
  // lasts (it starts with the first call that finds no daemon); false when it is over.
  bool WaitAgain();

 private:
  const absl::Duration grace_;
  absl::Mutex mu_;
  bool over_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> until_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_STARTUP_GRACE_H_
