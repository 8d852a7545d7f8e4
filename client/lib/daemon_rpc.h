// The client's side of the wire: one gRPC channel to kcached and a call per RPC, with the
// Resolve stream reassembled and its checksum verified. Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_DAEMON_RPC_H_
#define KCACHE_CLIENT_LIB_DAEMON_RPC_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/lib/call_watchdog.h"
#include "core/protocol.h"
#include "kcache/kcache.h"
#include "kcache/v1/kcache.grpc.pb.h"

namespace kcache::client {

// The largest artifact a Resolve header may announce; a bigger one is a broken stream.
inline constexpr uint64_t kMaxArtifactBytes = 1ull << 30;

// One answer of a ResolveMany: the entry's index in the request, and its kernel (checksum
// verified) or the daemon's error for it.
using ResolveManyCallback = std::function<void(size_t index, absl::StatusOr<FetchedKernel>)>;
// A progress message for the entry `index` of the call (0 for a Resolve), on the reading thread.
using ProgressCallback = std::function<void(size_t index, const v1::ResolveProgress&)>;

// How long a Resolve or ResolveMany waits (docs/client.md, "Deadlines"): at most `silence`
// without a message from the daemon for the kernel (its answer, or a ResolveProgress while it
// compiles), and at most `whole` in all; `whole` 0 = the compile limit the daemon states in
// its progress, plus `silence` (unbounded while a daemon that states none keeps talking).
struct WaitLimits {
  absl::Duration silence = absl::Seconds(2);
  absl::Duration whole = absl::ZeroDuration();
};

// How a Resolve or ResolveMany ended, besides its status.
enum class CallEnd {
  kFinished,  // the call ran to its end: the daemon's answers, its error, or a broken stream
  // UNAVAILABLE with no connection to a daemon: nothing listens (the socket missing, or the
  // connection refused), as opposed to a daemon that answered UNAVAILABLE.
  kUnreachable,
  kSilent,     // given up: nothing from the daemon for WaitLimits::silence
  kOverLimit,  // given up: WaitLimits::whole passed while the daemon still worked
};

// Thread-safe. Creating it never waits for the daemon; a call connects if needed and gives
// up at its deadline. Failures of the daemon (see IsDaemonFailure) come back with messages
// that name the address and say what to do.
class DaemonConnection {
 public:
  // `connect_now`: make the channel and start connecting in the background at once, so the
  // first call finds the connection made; false leaves both to the first call (a client
  // whose answers usually come by the fast path need not pay for gRPC's start-up, threads
  // and a connection it may never use).
  explicit DaemonConnection(std::string address, bool connect_now = true);

  const std::string& address() const { return address_; }

  // Replaces the channel when it is in TRANSIENT_FAILURE, so a daemon that came back is found
  // by the next call instead of after gRPC's reconnect back-off. The circuit breaker's probe
  // calls this.
  void RenewIfFailed();

  // One Resolve: progress messages while the daemon compiles (the request should set
  // want_progress), then a header, then chunks up to header.size; DataLoss when the stream is
  // broken (no header, two headers, more or fewer bytes than announced, a checksum mismatch).
  // DeadlineExceeded when `limits` ran out (*end says which). A refusal at one of the daemon's
  // bounds (RESOURCE_EXHAUSTED with a retry-after, "kcached is busy") is retried after that
  // pause while limits.silence (from the first attempt) allows.
  absl::StatusOr<FetchedKernel> Resolve(const v1::ResolveRequest& request, const WaitLimits& limits,
                                        CallEnd* end, const ProgressCallback& on_progress = {});
  // One ResolveMany (at most kMaxResolveManyEntries entries, under kMaxUnaryMessageBytes):
  // `on_answer` runs, on this thread, once per entry as its answer completes. `limits` holds
  // for each entry on its own: the call is given up once one entry not yet answered has heard
  // nothing for limits.silence. OK when every entry was answered; otherwise the call's failure
  // (the entries not answered got nothing), DataLoss for a broken stream. A busy refusal
  // before any answer is retried as Resolve's. `on_progress` (both calls) runs on this
  // thread for each progress message.
  absl::Status ResolveMany(const v1::ResolveManyRequest& request, const WaitLimits& limits,
                           const ResolveManyCallback& on_answer, CallEnd* end,
                           const ProgressCallback& on_progress = {});
  absl::StatusOr<DaemonStats> Stat(absl::Time deadline);
  absl::StatusOr<std::vector<ListedKernel>> List(absl::Time deadline);
  absl::StatusOr<ExportedManifest> ExportManifest(absl::Time deadline);
  absl::StatusOr<WarmTotals> Warm(const v1::WarmRequest& request, absl::Time deadline,
                                  const std::function<void(const WarmJobEvent&)>& on_job);

 private:
  std::shared_ptr<v1::KernelCache::Stub> stub();  // makes the channel if there is none
  // How a call that finished with `finished` ended, unless the watchdog gave it up:
  // kUnreachable or kFinished.
  CallEnd Ended(const grpc::ClientContext& context, const absl::Status& finished);
  void MakeChannel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Described(const absl::Status& status) const;

  const std::string address_;
  CallWatchdog watchdog_;
  absl::Mutex mu_;
  std::shared_ptr<grpc::Channel> channel_ ABSL_GUARDED_BY(mu_);  // null until first needed
  std::shared_ptr<v1::KernelCache::Stub> stub_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_DAEMON_RPC_H_
