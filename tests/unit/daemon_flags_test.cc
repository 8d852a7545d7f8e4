// daemon/host/daemon_flags.h: kcached's flags, read as kcached reads them.
#include "daemon/host/daemon_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kcache {
namespace {

absl::StatusOr<DaemonOptions> Parse(std::vector<std::string> args) {
  std::vector<std::string> all = {"kcached", "--store", "/nonexistent/store", "--listen",
                                  "unix:///nonexistent/kcache.sock"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : all) argv.push_back(arg.data());
  return ParseDaemonFlags(static_cast<int>(argv.size()), argv.data());
}

constexpr uint64_t kMiB = uint64_t{1} << 20;

// What the two tests below give, each in its own spelling.
void ExpectTheSizesBothSpellingsGive(const DaemonOptions& o) {
  EXPECT_EQ(o.memory_cache_bytes, 100 * kMiB);
  EXPECT_EQ(o.object_memory_bytes, 3 * kMiB);
  EXPECT_EQ(o.write_back_queue_bytes, 5 * kMiB);
  EXPECT_EQ(o.warm_start_bytes, 7 * kMiB);
  EXPECT_EQ(o.compile.memory_bytes_per_worker, 2048 * kMiB);
  EXPECT_EQ(o.max_queued_bytes, 9 * kMiB);
  EXPECT_EQ(o.objects.max_object_bytes, 11 * kMiB);
  EXPECT_EQ(o.objects.max_upload_bytes, 23 * kMiB);
  EXPECT_EQ(o.objects.max_entry_bytes, 128 * 1024u);
  EXPECT_EQ(o.fast_max_leased_bytes, 17 * kMiB);
  EXPECT_EQ(o.redis.commands.max_value_bytes, 19 * kMiB);
  EXPECT_EQ(o.redis.commands.max_key_bytes, 4096u);
  EXPECT_EQ(o.redis.max_buffer_bytes, 23 * kMiB);
  EXPECT_EQ(o.redis.max_total_bytes, 29 * kMiB);
}

TEST(DaemonFlagsTest, EverySizeFlagTakesBytesWithAUnit) {
  absl::StatusOr<DaemonOptions> o =
      Parse({"--memory-cache-max-bytes=100MiB", "--object-memory-max-bytes=3MiB",
             "--write-back-queue-max-bytes=5MiB", "--warm-start-max-bytes=7MiB",
             "--compile-memory-max-bytes=2GiB", "--queued-max-bytes=9MiB",
             "--object-max-bytes=11MiB", "--object-upload-max-bytes=23MiB",
             "--object-entry-max-bytes=128KiB", "--fast-leased-max-bytes=17MiB",
             "--redis-value-max-bytes=19MiB", "--redis-key-max-bytes=4KiB",
             "--redis-buffer-max-bytes=23MiB", "--redis-total-max-bytes=29MiB",
             "--store-max-bytes=1GiB", "--shared-max-bytes=31MiB", "--fast-arena-bytes=37MiB"});
  ASSERT_TRUE(o.ok()) << o.status();
  ExpectTheSizesBothSpellingsGive(*o);
  EXPECT_EQ(o->store_max_bytes, 1024 * kMiB);
  EXPECT_EQ(o->shared_max_bytes, 31 * kMiB);
  EXPECT_EQ(o->fast_arena_bytes, 37 * kMiB);
}

TEST(DaemonFlagsTest, TheEarlierNamesSetTheSameOptionsInTheirOwnUnits) {
  absl::StatusOr<DaemonOptions> o =
      Parse({"--memory-cache-mb=100", "--object-memory-mb=3", "--write-back-queue-mb=5",
             "--warm-start-mb=7", "--compile-memory-mb=2048", "--max-queued-mb=9",
             "--max-object-bytes=11MiB", "--max-object-upload-bytes=23MiB",
             "--max-object-entry-bytes=128KiB", "--fast-max-leased-bytes=17MiB",
             "--redis-max-value-bytes=19MiB", "--redis-max-key-bytes=4096",
             "--redis-max-buffer-bytes=23MiB", "--redis-max-total-bytes=29MiB"});
  ASSERT_TRUE(o.ok()) << o.status();
  ExpectTheSizesBothSpellingsGive(*o);
}

TEST(DaemonFlagsTest, TheDefaultsAreUnchanged) {
  absl::StatusOr<DaemonOptions> o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status();
  DaemonOptions defaults;
  EXPECT_EQ(o->memory_cache_bytes, defaults.memory_cache_bytes);
  EXPECT_EQ(o->object_memory_bytes, defaults.object_memory_bytes);
  EXPECT_EQ(o->compile.memory_bytes_per_worker, defaults.compile.memory_bytes_per_worker);
  EXPECT_EQ(o->max_queued_bytes, defaults.max_queued_bytes);
  EXPECT_EQ(o->objects.max_object_bytes, defaults.objects.max_object_bytes);
}

TEST(DaemonFlagsTest, ThePtxBuildQueueBoundsReachTheCache) {
  absl::StatusOr<DaemonOptions> o =
      Parse({"--ptx-build-queue=5", "--ptx-build-queue-per-client=2"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->ptx_build_queue, 5u);
  EXPECT_EQ(o->ptx_build_queue_per_client, 2u);
  EXPECT_FALSE(Parse({"--ptx-build-queue=0"}).ok());  // a queue that takes nothing is refused
}

TEST(DaemonFlagsTest, BoundsNameTheFlagByItsNewName) {
  absl::StatusOr<DaemonOptions> small_queue = Parse({"--queued-max-bytes=1KiB"});
  ASSERT_FALSE(small_queue.ok());
  EXPECT_NE(small_queue.status().message().find("--queued-max-bytes"), absl::string_view::npos)
      << small_queue.status();
  absl::StatusOr<DaemonOptions> upload =
      Parse({"--object-max-bytes=64MiB", "--object-upload-max-bytes=127MiB"});
  ASSERT_FALSE(upload.ok());
  EXPECT_NE(upload.status().message().find("--object-upload-max-bytes"), absl::string_view::npos)
      << upload.status();
  absl::StatusOr<DaemonOptions> entry = Parse({"--max-object-entry-bytes=4MiB"});
  ASSERT_FALSE(entry.ok());
  EXPECT_NE(entry.status().message().find("--object-entry-max-bytes"), absl::string_view::npos)
      << entry.status();
}

}  // namespace
}  // namespace kcache
