// A node's devices without a GPU: the distinct devices of pretend nodes (kcache/node.h), the
// load check through the client's types (kcache/device.h), and the command line's device
// lists and --arch native (client/cli/node_devices.h).
#include "client/cli/node_devices.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kcache/device.h"
#include "kcache/node.h"

namespace kcache::client {
namespace {

std::vector<GpuInfo> Node(const std::vector<std::string>& sms) {
  std::vector<Device> devices;
  for (const std::string& sm : sms) devices.push_back(*Device::Parse(sm, 13000));
  return PretendGpus(devices);
}

std::vector<std::string> Sms(const std::vector<Device>& devices) {
  std::vector<std::string> out;
  for (const Device& d : devices) out.push_back(d.ToString());
  return out;
}

TEST(NodeDevicesTest, OneDevicePerDistinctSmInTheOrderOfItsFirstGpu) {
  struct Case {
    std::vector<std::string> gpus, distinct;
    std::vector<size_t> device_of_gpu;
  };
  for (const Case& c : std::vector<Case>{
           {{"7.5", "8.6"}, {"7.5", "8.6"}, {0, 1}},
           {{"8.9", "9.0"}, {"8.9", "9.0"}, {0, 1}},
           {{"9.0", "10.0"}, {"9.0", "10.0"}, {0, 1}},
           {{"8.9", "8.9"}, {"8.9"}, {0, 0}},
           {{"8.6", "7.5", "8.6", "7.5"}, {"8.6", "7.5"}, {0, 1, 0, 1}},
       }) {
    std::vector<size_t> device_of_gpu;
    std::vector<Device> devices = DistinctDevices(Node(c.gpus), &device_of_gpu);
    EXPECT_EQ(Sms(devices), c.distinct);
    EXPECT_EQ(device_of_gpu, c.device_of_gpu);
  }
}

TEST(NodeDevicesTest, PretendGpusAreNumberedAndNamedBySm) {
  std::vector<GpuInfo> gpus = Node({"7.5", "8.6"});
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].ordinal, 1);
  EXPECT_EQ(gpus[1].name, "pretend sm_86");
  EXPECT_EQ(gpus[1].device.driver_version, 13000u);
}

TEST(NodeDevicesTest, CheckRunsOnTakesTheFetchedKernelAndTheGpu) {
  FetchedKernel k;
  k.kernel_name = "softmax";
  k.kind = ArtifactKind::kCubin;
  k.target = "sm_89";
  k.min_driver = 13000;
  GpuInfo h100;
  h100.ordinal = 1;
  h100.name = "NVIDIA H100";
  h100.device = {9, 0, 13000};
  absl::Status refused = CheckRunsOn(k, h100);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(
      refused.message(), "softmax is sm_89 SASS; GPU 1 is NVIDIA H100 (sm_90): resolve it for 9.0"))
      << refused;
  GpuInfo ada;
  ada.device = {8, 9, 13000};
  EXPECT_TRUE(CheckRunsOn(k, ada).ok());
  k.kind = ArtifactKind::kPtx;
  k.target = "compute_89";
  EXPECT_TRUE(CheckRunsOn(k, h100).ok());  // PTX at or below the GPU: the driver JITs it
}

TEST(NodeDevicesTest, ArchNativeTakesTheVisibleGpusSms) {
  absl::StatusOr<std::vector<GpuInfo>> gpus = Node({"8.6", "9.0", "8.6"});
  EXPECT_EQ(*cli::ExpandNativeArch("native", gpus), "8.6,9.0");
  EXPECT_EQ(*cli::ExpandNativeArch("7.5, native", gpus), "7.5,8.6,9.0");
  EXPECT_EQ(*cli::ExpandNativeArch("9.0,native", gpus), "9.0,8.6");  // 9.0 named once
  EXPECT_TRUE(cli::NamesNative("7.5,native"));
  EXPECT_FALSE(cli::NamesNative("7.5,8.6"));
}

TEST(NodeDevicesTest, ArchNativeWithoutAGpuIsBadInputSayingWhatToDo) {
  absl::StatusOr<std::vector<GpuInfo>> none = absl::NotFoundError("no CUDA driver: ...");
  absl::StatusOr<std::string> arch = cli::ExpandNativeArch("native", none);
  ASSERT_EQ(arch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(arch.status().message(), "no CUDA driver")) << arch.status();
  EXPECT_TRUE(absl::StrContains(arch.status().message(), "--arch 7.5,8.6,8.9")) << arch.status();
}

TEST(NodeDevicesTest, DeviceListsKeepTheOrderAndDropARepeatedSm) {
  absl::StatusOr<std::vector<Device>> devices = cli::ParseDeviceList("8.9, 9.0,sm_89", 13000);
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(Sms(*devices), (std::vector<std::string>{"8.9", "9.0"}));
  EXPECT_EQ((*devices)[1].driver_version, 13000u);
  absl::StatusOr<std::vector<Device>> bad = cli::ParseDeviceList("8.9,nine", 0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "'nine'")) << bad.status();
}

}  // namespace
}  // namespace kcache::client
