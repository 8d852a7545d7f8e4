// daemon/cache/write_behind.h: writes after the request, in order, once per artifact waiting,
// within a byte bound (past it dropped and told), and none lost at shutdown.
#include "daemon/cache/write_behind.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/kernel_spec.h"

namespace kcache {
namespace {

std::shared_ptr<const Artifact> Make(const std::string& name, size_t bytes) {
  auto artifact = std::make_shared<Artifact>();
  KernelSpec spec;
  spec.source = "// " + name;  // the id is the source's
  artifact->meta.key.kernel_id = ComputeKernelId(spec);
  artifact->meta.key.kind = ArtifactKind::kCubin;
  artifact->bytes = std::string(bytes, 'x');
  artifact->meta.checksum = PayloadChecksum(artifact->bytes);
  return artifact;
}

// Records what it wrote; the first write waits for `release`.
struct Recorder {
  absl::Mutex mu;
  std::vector<std::string> written;
  absl::Notification release;
  int dropped = 0;

  std::unique_ptr<WriteBehind> Start(uint64_t max_bytes) {
    return std::make_unique<WriteBehind>(
        max_bytes,
        [this](const Artifact& artifact) {
          release.WaitForNotification();
          absl::MutexLock lock(&mu);
          written.push_back(std::to_string(artifact.bytes.size()));
        },
        [this] {
          absl::MutexLock lock(&mu);
          ++dropped;
        });
  }
};

TEST(WriteBehindTest, WritesInOrderOnceEachWithinTheBoundAndDropsPastIt) {
  Recorder r;
  std::unique_ptr<WriteBehind> behind = r.Start(/*max_bytes=*/100);
  EXPECT_TRUE(behind->Add(Make("a", 10)));
  EXPECT_TRUE(behind->Add(Make("b", 20)));
  EXPECT_TRUE(behind->Add(Make("a", 10)));  // waiting already: not queued twice
  EXPECT_TRUE(behind->Add(Make("c", 70)));  // 100 bytes waiting now
  EXPECT_FALSE(behind->Add(Make("d", 1)));  // past the bound: dropped, told
  r.release.Notify();
  behind->Drain();
  {
    absl::MutexLock lock(&r.mu);
    EXPECT_EQ(r.written, (std::vector<std::string>{"10", "20", "70"}));
    EXPECT_EQ(r.dropped, 1);
  }
  EXPECT_TRUE(behind->Add(Make("d", 1)));   // room again
  EXPECT_TRUE(behind->Add(Make("a", 10)));  // written, no longer waiting: queued again
  behind->Drain();
  absl::MutexLock lock(&r.mu);
  EXPECT_EQ(r.written, (std::vector<std::string>{"10", "20", "70", "1", "10"}));
}

TEST(WriteBehindTest, NothingAcceptedIsLostAtShutdown) {
  Recorder r;
  std::unique_ptr<WriteBehind> behind = r.Start(/*max_bytes=*/1 << 20);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(behind->Add(Make(std::to_string(i), 100 + i)));
  r.release.Notify();
  behind.reset();  // drains, then stops
  absl::MutexLock lock(&r.mu);
  EXPECT_EQ(r.written.size(), 50u);
  EXPECT_EQ(r.written.back(), "149");
}

TEST(WriteBehindTest, AZeroBoundDropsEveryWrite) {
  Recorder r;
  r.release.Notify();
  std::unique_ptr<WriteBehind> behind = r.Start(/*max_bytes=*/0);
  EXPECT_FALSE(behind->Add(Make("a", 1)));
  behind->Drain();
  absl::MutexLock lock(&r.mu);
  EXPECT_TRUE(r.written.empty());
  EXPECT_EQ(r.dropped, 1);
}

}  // namespace
}  // namespace kcache
