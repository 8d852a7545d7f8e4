// CUDA_VISIBLE_DEVICES as the driver reads it (client/lib/visible_devices.h), without a GPU:
// indices, GPU and MIG UUIDs, the entry the driver stops at, the labels and the "no GPU" reason.
#include "client/lib/visible_devices.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace kcache::client {
namespace {

using Entries = std::vector<std::string>;

std::vector<GpuInfo> Gpus(int n) {
  std::vector<GpuInfo> gpus(n);
  for (int i = 0; i < n; ++i) {
    gpus[i].ordinal = i;
    gpus[i].uuid = "GPU-0000000" + std::to_string(i);
  }
  return gpus;
}

TEST(VisibleDevicesTest, UnsetSelectsNothingAndLabelsNothing) {
  VisibleDevices v = ParseVisibleDevices(nullptr);
  EXPECT_FALSE(v.set);
  std::vector<GpuInfo> gpus = Gpus(2);
  LabelVisibleGpus(v, &gpus);
  EXPECT_EQ(gpus[0].visible_as, "");
  EXPECT_EQ(WhyNoGpu(v), "");
}

TEST(VisibleDevicesTest, IndicesAndUuidsLabelTheGpusInTheDriversOrder) {
  VisibleDevices v = ParseVisibleDevices(" 3, GPU-8f2c1a9e ,1");
  EXPECT_EQ(v.entries, (Entries{"3", "GPU-8f2c1a9e", "1"}));
  EXPECT_EQ(v.stopped_at, std::nullopt);
  std::vector<GpuInfo> gpus = Gpus(3);
  LabelVisibleGpus(v, &gpus);
  EXPECT_EQ(gpus[0].visible_as, "3");
  EXPECT_EQ(gpus[1].visible_as, "GPU-8f2c1a9e");
  EXPECT_EQ(gpus[2].visible_as, "1");
  EXPECT_EQ(gpus[1].uuid, "GPU-00000001");  // the driver's UUID is kept for a GPU
}

TEST(VisibleDevicesTest, AMigInstanceTakesItsMigUuid) {
  VisibleDevices v = ParseVisibleDevices("MIG-5c4f3d2e-aaaa-bbbb-cccc-0123456789ab");
  std::vector<GpuInfo> gpus = Gpus(1);
  LabelVisibleGpus(v, &gpus);
  EXPECT_EQ(gpus[0].uuid, "MIG-5c4f3d2e-aaaa-bbbb-cccc-0123456789ab");
  EXPECT_EQ(gpus[0].visible_as, gpus[0].uuid);
}

TEST(VisibleDevicesTest, TheDriverStopsAtTheFirstEntryItDoesNotUnderstand) {
  VisibleDevices v = ParseVisibleDevices("0,-1,2");
  EXPECT_EQ(v.entries, (Entries{"0"}));
  EXPECT_EQ(v.stopped_at, "-1");
  EXPECT_EQ(ParseVisibleDevices("GPU-,1").stopped_at, "GPU-");
  EXPECT_EQ(ParseVisibleDevices("0,,1").stopped_at, "");  // an empty entry stops it too
  EXPECT_EQ(ParseVisibleDevices("0,,1").entries, (Entries{"0"}));
}

TEST(VisibleDevicesTest, EntriesThatDoNotMatchTheGpusOneToOneLabelNothing) {
  VisibleDevices v = ParseVisibleDevices("0,1,2");
  std::vector<GpuInfo> gpus = Gpus(2);  // entry 2 named a GPU this machine lacks
  LabelVisibleGpus(v, &gpus);
  EXPECT_EQ(gpus[0].visible_as, "");
  EXPECT_EQ(gpus[1].visible_as, "");
}

TEST(VisibleDevicesTest, SaysWhenTheVariableHidesEveryGpu) {
  EXPECT_EQ(WhyNoGpu(ParseVisibleDevices("")), "CUDA_VISIBLE_DEVICES='' hides every GPU");
  std::string bad = WhyNoGpu(ParseVisibleDevices("-1"));
  EXPECT_TRUE(absl::StrContains(bad, "its first entry '-1' is not a device index")) << bad;
  std::string absent = WhyNoGpu(ParseVisibleDevices("7"));
  EXPECT_TRUE(absl::StrContains(absent, "CUDA_VISIBLE_DEVICES='7' selects no GPU")) << absent;
}

}  // namespace
}  // namespace kcache::client
