// ProgressTicker: one thread that calls each registered task every interval, so that calls
// waiting for a compile can send their clients a ResolveProgress (docs/protocol.md,
// "Progress") without holding a thread each.
#ifndef KCACHE_DAEMON_SERVICE_PROGRESS_TICKER_H_
#define KCACHE_DAEMON_SERVICE_PROGRESS_TICKER_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/compile/compile_status.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache {

// How often a call waiting for a compile tells its client so: well inside a client's default
// 2 s deadline, which bounds the silence it accepts.
inline constexpr absl::Duration kProgressInterval = absl::Milliseconds(500);

// Thread-safe. Tasks run on the ticker's thread, never under its lock (a task may Add).
class ProgressTicker {
 public:
  // A task: called with `stopping` false every interval until it returns false; called once
  // with `stopping` true when the ticker is destroyed while it is still registered (it must
  // then release what it holds; its return value is ignored).
  using Task = std::function<bool(bool stopping)>;

  explicit ProgressTicker(absl::Duration interval = kProgressInterval);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

  // The first call is one interval from now.
  void Add(Task task);
  // Calls `send` now and then every interval until it returns false or the ticker stops;
  // then `release` once.
  void Every(std::function<bool()> send, std::function<void()> release);

 private:
  void Run();

  const absl::Duration interval_;
  absl::Mutex mu_;
  std::vector<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// What the reactors need to keep a call that waits for a compile alive.
struct ProgressSource {
  ProgressTicker* ticker = nullptr;
  absl::Duration compile_limit = absl::ZeroDuration();  // 0 or infinite = none
  // The progress of a call kcached accepted at `accepted`, waiting for the compile `watch`
  // follows (null or not yet pointed at one: the stage is unknown).
  v1::ResolveProgress Make(absl::Time accepted, const CompileWatch* watch) const;
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_SERVICE_PROGRESS_TICKER_H_
