// CarryToDriver (daemon/cache/unknown_driver.h): which memory entries for an unknown driver
// serve a known one, and the reason they are served with.
#include "daemon/cache/unknown_driver.h"

#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/match.h"
#include "engine/resolve/decide.h"

namespace kcache {
namespace {

Answer Entry(ServeRule rule, const char* target, uint32_t min_driver) {
  auto artifact = std::make_shared<Artifact>();
  artifact->meta.key.target = *ParseTarget(target);
  artifact->meta.key.kind = artifact->meta.key.target.kind == TargetKind::kSass
                                ? ArtifactKind::kCubin
                                : ArtifactKind::kPtx;
  artifact->meta.min_driver = min_driver;
  artifact->bytes = "code";
  Device unknown{artifact->meta.key.target.sm, 0};
  return Answer{artifact, rule, ServeReason(rule, artifact->meta, unknown)};
}

TEST(CarryToDriverTest, ExactSassServesADriverThatLoadsIt) {
  Answer unknown = Entry(ServeRule::kExactSass, "sm_89", 13000);
  ASSERT_TRUE(absl::StrContains(unknown.reason, "driver unknown"));
  std::optional<Answer> carried = CarryToDriver(unknown, Device{Sm{8, 9}, 13000});
  ASSERT_TRUE(carried.has_value());
  EXPECT_EQ(carried->artifact, unknown.artifact);
  EXPECT_EQ(carried->rule, ServeRule::kExactSass);
  EXPECT_EQ(carried->reason, "sm_89 cubin matches device 8.9");
}

TEST(CarryToDriverTest, CompatibleSassCarriesToANewerDriver) {
  Answer unknown = Entry(ServeRule::kCompatibleSass, "sm_86", 12040);
  std::optional<Answer> carried = CarryToDriver(unknown, Device{Sm{8, 9}, 13000});
  ASSERT_TRUE(carried.has_value());
  EXPECT_EQ(carried->rule, ServeRule::kCompatibleSass);
  EXPECT_FALSE(absl::StrContains(carried->reason, "driver unknown")) << carried->reason;
}

TEST(CarryToDriverTest, NotToADriverThatCannotLoadIt) {
  Answer unknown = Entry(ServeRule::kExactSass, "sm_89", 13000);
  EXPECT_FALSE(CarryToDriver(unknown, Device{Sm{8, 9}, 12080}).has_value());
}

TEST(CarryToDriverTest, NeverPtx) {
  // With a known driver a toolkit may build the SASS: the store decides, not memory.
  Answer unknown = Entry(ServeRule::kPtxJit, "compute_75", 12000);
  EXPECT_FALSE(CarryToDriver(unknown, Device{Sm{8, 9}, 13000}).has_value());
}

TEST(CarryToDriverTest, NotToAnUnknownDriver) {
  Answer unknown = Entry(ServeRule::kExactSass, "sm_89", 13000);
  EXPECT_FALSE(CarryToDriver(unknown, Device{Sm{8, 9}, 0}).has_value());
}

}  // namespace
}  // namespace kcache
