// A node's GPUs in one call, pretended without a GPU (7.5 + 8.6, 8.9 + 9.0, 9.0 + 10.0, two of
// the same SM) against a real kcached: each GPU gets its own SM's artifact, one per distinct SM
// (the daemon compiles once per distinct SM, not per GPU), through the C++ API (kcache/node.h),
// the C ABI (kcache_resolve_for_gpus) and the kcache tool (get --device 7.5,8.6, and --fatbin:
// one image of every distinct SM's cubin); and each GPU's artifact passes the load check on its
// GPU and is refused, with the message, on the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kcache/device.h"
#include "kcache/kcache.h"
#include "kcache/kcache_c.h"
#include "kcache/node.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::client {
namespace {

using ::kcache::testing::Contains;

KernelSource Saxpy() {
  KernelSource saxpy;
  saxpy.name = "saxpy";
  saxpy.source = ::kcache::testing::kSaxpySource;
  return saxpy;
}

// saxpy again (another kernel id), for 9.0 and later only.
KernelSource HopperOnly() {
  KernelSource hopper = Saxpy();
  hopper.name = "hopper_only";
  hopper.options = {"-DHOPPER=1"};
  hopper.min_arch = 90;
  return hopper;
}

std::vector<GpuInfo> Node(const std::vector<std::string>& sms) {
  std::vector<Device> devices;
  for (const std::string& sm : sms) devices.push_back(*Device::Parse(sm, 13000));
  return PretendGpus(devices);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string SassOf(const GpuInfo& gpu) { return absl::StrCat("sm_", gpu.device.arch()); }

class NodeResolveTest : public ::testing::TestWithParam<std::vector<std::string>> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    ClientOptions options;
    options.address = daemon_.address();
    options.deadline = absl::Seconds(120);
    options.local_compile_fallback = false;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  uint64_t Compiles() {
    absl::StatusOr<DaemonStats> stats = client_->Stat();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? stats->Counter("compile.runs") : 0;
  }

  ::kcache::testing::DaemonProcess daemon_;
  std::unique_ptr<Client> client_;
};

TEST_P(NodeResolveTest, EachGpuGetsItsOwnSmsArtifactOncePerDistinctSm) {
  std::vector<GpuInfo> gpus = Node(GetParam());
  NodeKernels node = ResolveForGpus(*client_, {Saxpy(), HopperOnly()}, gpus);
  std::vector<size_t> device_of_gpu;
  ASSERT_EQ(node.devices.size(), DistinctDevices(gpus, &device_of_gpu).size());
  EXPECT_EQ(node.device_of_gpu, device_of_gpu);
  // One compile per (distinct SM, kernel the SM is in range of), never one per GPU.
  uint64_t want_compiles = 0;
  for (const Device& d : node.devices) want_compiles += d.arch() >= 90 ? 2 : 1;
  EXPECT_EQ(Compiles(), want_compiles) << daemon_.Log();
  for (size_t g = 0; g < gpus.size(); ++g) {
    const auto& kernels = node.ForGpu(g);
    ASSERT_EQ(kernels.size(), 2u);
    ASSERT_TRUE(kernels[0].ok()) << kernels[0].status();
    EXPECT_EQ(kernels[0]->target, SassOf(gpus[g]));
    EXPECT_TRUE(CheckRunsOn(*kernels[0], gpus[g]).ok()) << CheckRunsOn(*kernels[0], gpus[g]);
    if (gpus[g].device.arch() >= 90) {
      ASSERT_TRUE(kernels[1].ok()) << kernels[1].status();
      EXPECT_EQ(kernels[1]->target, SassOf(gpus[g]));
    } else {
      EXPECT_EQ(kernels[1].status().code(), absl::StatusCode::kNotFound);
      EXPECT_TRUE(absl::StrContains(kernels[1].status().message(), "min_arch"))
          << kernels[1].status();
    }
    for (size_t h = 0; h < gpus.size(); ++h) {
      if (gpus[h].device.arch() == gpus[g].device.arch()) {
        EXPECT_EQ(&node.ForGpu(h), &kernels) << "GPUs of one SM share one artifact";
        continue;
      }
      // Every pair here is of SMs whose SASS does not run on each other.
      absl::Status refused = CheckRunsOn(*kernels[0], gpus[h]);
      EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_TRUE(absl::StrContains(
          refused.message(),
          absl::StrCat("saxpy is ", SassOf(gpus[g]), " SASS; GPU ", h, " is ", gpus[h].name, " (",
                       SassOf(gpus[h]), "): resolve it for ", gpus[h].device.ToString())))
          << refused;
    }
  }
}

// The C ABI: kcache_resolve_for_gpus reports each distinct device under its first GPU.
TEST_P(NodeResolveTest, TheCAbiGivesEachGpuItsDevicesKernels) {
  std::vector<GpuInfo> infos = Node(GetParam());
  std::vector<kcache_gpu> gpus;
  for (const GpuInfo& g : infos) {
    kcache_gpu c{};
    c.ordinal = g.ordinal;
    c.device = {g.device.sm_major, g.device.sm_minor, g.device.driver_version};
    gpus.push_back(c);
  }
  kcache_options options;
  kcache_options_init(&options);
  std::string address = daemon_.address();
  options.address = address.c_str();
  options.deadline_ms = 120000;
  kcache_client* c = nullptr;
  ASSERT_EQ(kcache_connect(&options, &c), KCACHE_OK) << kcache_last_error();
  kcache_source saxpy{};
  saxpy.name = "saxpy";
  saxpy.source = ::kcache::testing::kSaxpySource;
  kcache_kernel_ref refs[] = {{&saxpy, nullptr, nullptr}};
  struct Got {
    std::map<size_t, kcache_kernel*> by_first_gpu;
  } got;
  std::vector<size_t> device_of_gpu(gpus.size(), 99);
  ASSERT_EQ(kcache_resolve_for_gpus(
                c, refs, 1, gpus.data(), gpus.size(), device_of_gpu.data(),
                [](void* context, size_t first_gpu, size_t index, int status, const char* message,
                   kcache_kernel* kernel) {
                  EXPECT_EQ(index, 0u);
                  EXPECT_EQ(status, KCACHE_OK) << message;
                  static_cast<Got*>(context)->by_first_gpu[first_gpu] = kernel;
                },
                &got),
            KCACHE_OK)
      << kcache_last_error();
  std::vector<size_t> distinct;
  DistinctDevices(infos, &distinct);
  size_t distinct_count = *std::max_element(distinct.begin(), distinct.end()) + 1;
  EXPECT_EQ(got.by_first_gpu.size(), distinct_count);
  for (size_t g = 0; g < gpus.size(); ++g) {
    ASSERT_TRUE(got.by_first_gpu.count(device_of_gpu[g])) << g;
    kcache_kernel* k = got.by_first_gpu[device_of_gpu[g]];
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(kcache_kernel_target(k), SassOf(infos[g]));
    EXPECT_EQ(kcache_kernel_check_gpu(k, &gpus[g]), KCACHE_OK) << kcache_last_error();
    for (size_t h = 0; h < gpus.size(); ++h) {
      if (infos[h].device.arch() == infos[g].device.arch()) continue;
      EXPECT_EQ(kcache_kernel_check_gpu(k, &gpus[h]), KCACHE_FAILED_PRECONDITION);
      EXPECT_TRUE(Contains(kcache_last_error(), "resolve it for " + infos[h].device.ToString()))
          << kcache_last_error();
    }
    char* entries = nullptr;
    ASSERT_EQ(kcache_kernel_entry_points(k, &entries), KCACHE_OK) << kcache_last_error();
    EXPECT_STREQ(entries, "saxpy");
    kcache_string_free(entries);
  }
  for (auto& [first, k] : got.by_first_gpu) kcache_kernel_free(k);
  kcache_client_free(c);
}

// The kcache tool: `get --device A,B` fetches each kernel for each distinct SM in one call.
TEST_P(NodeResolveTest, TheCliGetsEachDistinctSmsArtifact) {
  ::kcache::testing::TempDir dir;
  ::kcache::testing::WriteTestKernelFiles(dir);
  std::string manifest = dir.Write("manifest.yaml", ::kcache::testing::kTestManifest);
  std::string cli = ::kcache::testing::KcacheCli();
  std::string server = " --server " + daemon_.address();
  ::kcache::testing::RunResult warm =
      ::kcache::testing::Run(cli + " warm --arch 7.5" + server + " " + manifest);
  ASSERT_EQ(warm.exit_code, 0) << warm.output;  // registers the kernels by name
  std::vector<std::string> sms = GetParam();
  std::string list = absl::StrJoin(sms, ",");
  std::string out = dir / "out";
  ::kcache::testing::RunResult get = ::kcache::testing::Run(
      cli + " get --device " + list + " --kernel saxpy -o " + out + " --timeout 120" + server);
  ASSERT_EQ(get.exit_code, 0) << get.output;
  std::vector<GpuInfo> gpus = Node(sms);
  std::vector<size_t> device_of_gpu;
  std::vector<Device> devices = DistinctDevices(gpus, &device_of_gpu);
  for (const Device& d : devices) {
    std::string file = absl::StrCat(out, "/saxpy.sm_", d.arch(), ".cubin");
    EXPECT_TRUE(std::filesystem::exists(file)) << file << "\n" << get.output;
  }
  EXPECT_TRUE(
      Contains(get.output, absl::StrCat(devices.size(), " of ", devices.size(), " kernels")))
      << get.output;
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(out)) files += entry.exists();
  EXPECT_EQ(files, devices.size()) << get.output;

  // --fatbin: one image holding each distinct SM's cubin, as fetched.
  ::kcache::testing::RunResult fat = ::kcache::testing::Run(
      cli + " get --device " + list + " --kernel saxpy -o " + out + " --fatbin" + server);
  ASSERT_EQ(fat.exit_code, 0) << fat.output;
  std::string fatbin = ReadFile(out + "/saxpy.fatbin");
  ASSERT_GE(fatbin.size(), 4u) << fat.output;
  EXPECT_EQ(fatbin.substr(0, 4), std::string("\x50\xed\x55\xba", 4));  // fatbin magic
  for (const Device& d : devices) {
    std::string cubin = ReadFile(absl::StrCat(out, "/saxpy.sm_", d.arch(), ".cubin"));
    ASSERT_FALSE(cubin.empty());
    EXPECT_NE(fatbin.find(cubin), std::string::npos) << "sm_" << d.arch() << " missing";
  }
}

INSTANTIATE_TEST_SUITE_P(PretendNodes, NodeResolveTest,
                         ::testing::Values(std::vector<std::string>{"7.5", "8.6"},
                                           std::vector<std::string>{"8.9", "9.0"},
                                           std::vector<std::string>{"9.0", "10.0"},
                                           std::vector<std::string>{"8.9", "8.9"}),
                         [](const auto& info) {
                           std::string name = absl::StrJoin(info.param, "_and_");
                           for (char& ch : name) {
                             if (ch == '.') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kcache::client
