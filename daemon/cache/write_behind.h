// WriteBehind: writes done after the request that caused them, by one thread of its own
// (core/background_writer.h). A
// baked-store hit is copied into the writable store (so it is kept when the image's store
// goes, and counted in its LRU); made on the request's path, that copy's compression and
// write were about half of a first request's time with a large baked store.
//
// Bounded: at most `max_bytes` of artifacts wait; past it a write is dropped (the next hit of
// that artifact queues it again) and `on_dropped` is told. One artifact is queued once at a
// time. On destruction the queue is drained: nothing accepted is lost on a clean shutdown.
#ifndef KCACHE_DAEMON_CACHE_WRITE_BEHIND_H_
#define KCACHE_DAEMON_CACHE_WRITE_BEHIND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "core/artifact.h"
#include "core/background_writer.h"

namespace kcache {

class WriteBehind {
 public:
  // `write` runs on the writer thread, one artifact at a time, in the order queued.
  WriteBehind(uint64_t max_bytes, std::function<void(const Artifact&)> write,
              std::function<void()> on_dropped);
  ~WriteBehind();  // drains the queue, then joins the writer
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // Queues `artifact`'s write; false when it was dropped (the bound), true when queued or
  // already waiting.
  bool Add(std::shared_ptr<const Artifact> artifact);

  // Blocks until every write queued before the call has run (tests; shutdown).
  void Drain();

 private:
  const std::function<void(const Artifact&)> write_;
  const std::function<void()> on_dropped_;
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> queued_keys_ ABSL_GUARDED_BY(mu_);
  BackgroundWriter<std::shared_ptr<const Artifact>> writer_;  // last: joined first
};

}  // namespace kcache

#endif  // KCACHE_DAEMON_CACHE_WRITE_BEHIND_H_
