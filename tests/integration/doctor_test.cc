// `kcache doctor` as a user runs it: on this machine (which may have no GPU), with no driver
// forced, with a missing toolkit, with healthy, corrupt and missing stores, and against a real
// kcached and a dead socket.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/target.h"
#include "engine/compile/toolkit.h"
#include "kcache/device.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/store_faults.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using ::kcache::testing::Contains;
using ::kcache::testing::KcacheCli;
using ::kcache::testing::RunResult;
using ::kcache::testing::TempDir;

// Makes the driver unloadable whatever the machine has: a machine with no GPU.
constexpr char kNoDriver[] = "KCACHE_LIBCUDA=/nonexistent/libcuda.so.1 ";

uint64_t LoadLE(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

// Flips one byte in the middle of the payload of the first artifact value in the store's
// table and blob files, as a bad disk would. docs/store-format.md: a value starts with
// "KCSV"; byte 20 is the value format version (1), byte 21 the type (1 = artifact); u32le
// metadata length at 24, u64le stored payload length at 28; a 44-byte header. The artifacts'
// column family stores values uncompressed, so they appear as is in the files.
std::string CorruptOneArtifact(const std::string& store) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(store)) {
    std::string ext = entry.path().extension().string();
    if (ext == ".sst" || ext == ".blob") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(io)), {});
    for (size_t at = content.find("KCSV"); at != std::string::npos;
         at = content.find("KCSV", at + 1)) {
      if (at + 44 > content.size() || content[at + 20] != 1 || content[at + 21] != 1) continue;
      uint64_t meta_len = LoadLE(content, at + 24, 4);
      uint64_t payload_len = LoadLE(content, at + 28, 8);
      size_t flip = at + 44 + meta_len + payload_len / 2;
      if (payload_len == 0 || at + 44 + meta_len + payload_len > content.size()) continue;
      io.seekp(static_cast<std::streamoff>(flip));
      io.put(static_cast<char>(content[flip] ^ 0x10));
      return file.string();
    }
  }
  return "";
}

class DoctorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::kcache::testing::WriteTestKernelFiles(dir_);
    manifest_ = dir_.Write("manifest.yaml", ::kcache::testing::kTestManifest);
    store_ = dir_ / "store";
  }
  // `env` is prepended ("NAME=value "); stdout and stderr together.
  RunResult Doctor(const std::string& args, const std::string& env = kNoDriver) {
    return ::kcache::testing::Run(env + KcacheCli() + " doctor " + args);
  }
  RunResult Warm() {
    return ::kcache::testing::Run(KcacheCli() + " warm --arch 8.6 --store " + store_ + " " +
                                  manifest_);
  }

  TempDir dir_;
  std::string manifest_;
  std::string store_;
};

TEST_F(DoctorTest, NoGpuIsInformationWithAGoodToolkitAndAHealthyStore) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(Toolkit::DefaultRoot());
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();  // the build needs one too
  RunResult warm = Warm();
  ASSERT_EQ(warm.exit_code, 0) << warm.output;

  RunResult r = Doctor("--store " + store_);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "toolkit " + Toolkit::DefaultRoot() + "\n")) << r.output;
  EXPECT_TRUE(Contains(r.output, (*toolkit)->identity().id)) << r.output;
  std::vector<std::string> archs;
  for (int arch : (*toolkit)->supported_archs()) archs.push_back(SmFromArch(arch).ToString());
  EXPECT_TRUE(Contains(r.output, "architectures: " + absl::StrJoin(archs, " "))) << r.output;
  EXPECT_TRUE(Contains(r.output, "info     driver: none; GPUs: none (no CUDA driver")) << r.output;
  EXPECT_TRUE(Contains(r.output, "store " + store_ + "\n")) << r.output;
  // The manifest's two kernels for sm_86: a cubin and PTX each.
  EXPECT_TRUE(Contains(r.output, "2 kernels, 4 artifacts")) << r.output;
  EXPECT_TRUE(Contains(r.output, "ok       checksums verified: 2 kernels")) << r.output;
  EXPECT_FALSE(Contains(r.output, "problem  ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "\nno problems\n")) << r.output;
}

TEST_F(DoctorTest, ThisMachinesGpusAreWhatTheDriverSays) {
  RunResult r = Doctor("", /*env=*/"");
  absl::StatusOr<std::vector<client::GpuInfo>> gpus = client::DetectDevices();
  if (gpus.ok()) {
    for (const client::GpuInfo& gpu : *gpus) {
      EXPECT_TRUE(Contains(r.output, absl::StrCat("GPU ", gpu.ordinal, ": ", gpu.name)))
          << r.output;
    }
  } else {
    ASSERT_TRUE(absl::IsNotFound(gpus.status())) << gpus.status();
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, "GPUs: none (")) << r.output;
    std::string message(gpus.status().message());  // doctor shows what, before the advice
    EXPECT_TRUE(Contains(r.output, message.substr(0, message.find("; ")))) << r.output;
  }
}

TEST_F(DoctorTest, TheToolkitsStubLibcudaMeansNoGpu) {
  std::string stub = Toolkit::DefaultRoot() + "/lib64/stubs/libcuda.so";
  if (!fs::exists(stub)) GTEST_SKIP() << "no stub libcuda at " << stub;
  RunResult r = Doctor("", "KCACHE_LIBCUDA=" + stub + " ");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "GPUs: none (no CUDA driver: the libcuda loaded is the CUDA "
                       "toolkit's stub library"))
      << r.output;
}

TEST_F(DoctorTest, RequireGpuWithoutAGpuIsAProblemWithAFix) {
  RunResult r = Doctor("--require-gpu");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "problem  GPUs: none (no CUDA driver")) << r.output;
  EXPECT_TRUE(Contains(r.output, "fix: install the NVIDIA driver")) << r.output;
  EXPECT_TRUE(Contains(r.output, "\n1 problem\n")) << r.output;
}

TEST_F(DoctorTest, MissingToolkitNamesThePathAndTheFix) {
  RunResult r = Doctor("--toolkit /nonexistent/cuda --toolkit " + Toolkit::DefaultRoot());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "toolkit /nonexistent/cuda\n  problem  no CUDA toolkit at "
                       "/nonexistent/cuda"))
      << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "fix: install the CUDA 13 toolkit at /nonexistent/cuda, or "
                       "pass --toolkit DIR"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "architectures: ")) << r.output;  // the good one still checked
  EXPECT_TRUE(Contains(r.output, "\n1 problem\n")) << r.output;
}

TEST_F(DoctorTest, CudaHomeAtAnEmptyDirectoryIsAMissingToolkit) {
  fs::create_directories(dir_ / "empty-cuda");
  std::string empty = dir_ / "empty-cuda";
  RunResult r = Doctor("", absl::StrCat(kNoDriver, "CUDA_HOME=", empty, " "));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "toolkit " + empty + "\n  problem  no CUDA toolkit at " + empty))
      << r.output;
  EXPECT_TRUE(Contains(
      r.output, "fix: install the CUDA 13 toolkit at " + empty + " (from CUDA_HOME=" + empty + ")"))
      << r.output;
}

TEST_F(DoctorTest, CorruptEntryIsAProblemUntilWarmRebuildsIt) {
  ASSERT_EQ(Warm().exit_code, 0);
  ASSERT_EQ(Doctor("--store " + store_).exit_code, 0);
  std::string file = CorruptOneArtifact(store_);
  ASSERT_FALSE(file.empty()) << "no artifact value found in " << store_;

  RunResult r = Doctor("--store " + store_);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "2 kernels, 3 artifacts")) << r.output;
  EXPECT_TRUE(Contains(r.output, "problem  1 corrupt entry:\n           artifact ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "otherwise run `kcache doctor --store " + store_ + " --repair`"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "then `kcache warm --store " + store_)) << r.output;
  // Doctor changed nothing: the same again.
  EXPECT_TRUE(Contains(Doctor("--store " + store_).output, "1 corrupt entry")) << r.output;

  RunResult rewarm = Warm();  // the fix
  ASSERT_EQ(rewarm.exit_code, 0) << rewarm.output;
  EXPECT_TRUE(Contains(rewarm.output, "] built")) << rewarm.output;
  RunResult after = Doctor("--store " + store_);
  EXPECT_EQ(after.exit_code, 0) << after.output;
  EXPECT_TRUE(Contains(after.output, "2 kernels, 4 artifacts")) << after.output;
}

TEST_F(DoctorTest, ListingDamageIsRepairedInPlaceByTheRunningDaemon) {
  ASSERT_EQ(Warm().exit_code, 0);
  std::string listing_sst;
  for (const auto& [family, file] : ::kcache::testing::LiveSstFiles(store_)) {
    if (family == "artifact_meta") listing_sst = file;
  }
  ASSERT_FALSE(listing_sst.empty()) << "no listing SST in " << store_;
  ::kcache::testing::FlipBit(listing_sst, 20);  // inside the first data block
  ASSERT_EQ(Doctor("--store " + store_).exit_code, 1);

  RunResult before = Doctor("--store " + store_);
  EXPECT_TRUE(Contains(before.output, "with kcached running on it, `kcache warm --server"))
      << before.output;

  // kcached meets the damage (its start-up scan, or the warm's) and rebuilds the listing;
  // doctor, opening the store read-only beside it, then finds it whole.
  ::kcache::testing::DaemonOptions options;
  options.store = store_;
  ::kcache::testing::DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  RunResult rewarm = ::kcache::testing::Run(KcacheCli() + " warm --arch 8.6 --server " +
                                            daemon.address() + " " + manifest_);
  ASSERT_EQ(rewarm.exit_code, 0) << rewarm.output;
  RunResult after = Doctor("--store " + store_);  // the daemon still runs
  EXPECT_EQ(after.exit_code, 0) << after.output << daemon.Log();
  EXPECT_TRUE(Contains(after.output, "2 kernels, 4 artifacts")) << after.output;
  EXPECT_TRUE(Contains(daemon.Log(), "rebuilt it from 4 artifacts that verify")) << daemon.Log();
}

TEST_F(DoctorTest, MissingStoreAndNotAStoreAreProblemsWithFixes) {
  std::string missing = dir_ / "no-store";
  fs::create_directories(dir_ / "notes");
  std::string not_store = dir_.Write("notes/notes.txt", "hello");
  not_store = dir_ / "notes";
  RunResult r = Doctor("--store " + missing + " --store " + not_store);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(
      Contains(r.output, "problem  '" + missing + "' is not a kcache store (no such directory)"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "fix: make one with `kcache warm --store " + missing)) << r.output;
  EXPECT_TRUE(Contains(r.output, not_store + " is not a kcache store")) << r.output;
  EXPECT_TRUE(Contains(r.output, "\n2 problems\n")) << r.output;
  EXPECT_FALSE(fs::exists(missing));  // read-only: nothing created
}

TEST_F(DoctorTest, RunningDaemonAnswersAndADeadSocketIsAProblem) {
  ::kcache::testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  // The daemon holds its store open for writing; doctor opens it read-only beside it.
  RunResult r = Doctor("--server " + daemon.address() + " --store " + daemon.store_path());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "daemon " + daemon.address() + "\n  ok       kcached answers"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "store " + daemon.store_path() + "\n  ok       opened"))
      << r.output;

  std::string dead = "unix://" + (dir_ / "dead.sock");
  auto start = std::chrono::steady_clock::now();
  RunResult d = Doctor("--timeout 2 --server " + dead);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(d.exit_code, 1) << d.output;
  EXPECT_TRUE(Contains(d.output, "daemon " + dead + "\n  problem  no answer: ")) << d.output;
  EXPECT_TRUE(Contains(d.output, "fix: start kcached")) << d.output;
  EXPECT_TRUE(Contains(d.output, "\n1 problem\n")) << d.output;
}

TEST_F(DoctorTest, JsonListsEveryCheckWithItsFindings) {
  ASSERT_EQ(Warm().exit_code, 0);
  // stderr dropped: only the JSON document on stdout.
  RunResult r = ::kcache::testing::Run(absl::StrCat(
      "{ ", kNoDriver, KcacheCli(), " doctor --json --toolkit /nonexistent/cuda --toolkit ",
      Toolkit::DefaultRoot(), " --store ", store_, " 2>/dev/null; }"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  nlohmann::json out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out["ok"], false);
  EXPECT_EQ(out["problems"], 1);
  ASSERT_EQ(out["checks"].size(), 5u);  // two toolkits, the GPUs, the sandbox, the store
  const nlohmann::json& missing = out["checks"][0];
  EXPECT_EQ(missing["check"], "toolkit");
  EXPECT_EQ(missing["subject"], "/nonexistent/cuda");
  EXPECT_EQ(missing["ok"], false);
  EXPECT_EQ(missing["findings"][0]["level"], "problem");
  EXPECT_TRUE(Contains(missing["findings"][0]["fix"].get<std::string>(), "--toolkit DIR"));
  const nlohmann::json& good = out["checks"][1];
  EXPECT_EQ(good["ok"], true);
  EXPECT_EQ(good["details"]["archs"].get<std::vector<int>>(),
            (*Toolkit::Load(Toolkit::DefaultRoot()))->supported_archs());
  const nlohmann::json& gpus = out["checks"][2];
  EXPECT_EQ(gpus["check"], "gpus");
  EXPECT_TRUE(gpus["details"]["driver_version"].is_null());
  EXPECT_TRUE(gpus["details"]["gpus"].empty());
  EXPECT_EQ(gpus["findings"][0]["level"], "info");
  const nlohmann::json& sandbox = out["checks"][3];
  EXPECT_EQ(sandbox["check"], "sandbox");
  EXPECT_EQ(sandbox["ok"], sandbox["details"]["enough"]);
  EXPECT_EQ(sandbox["details"]["landlock_abi"] > 0 && sandbox["details"]["seccomp"] == true,
            sandbox["details"]["enough"] == true);
  const nlohmann::json& store = out["checks"][4];
  EXPECT_EQ(store["details"]["kernels"], 2);
  EXPECT_EQ(store["details"]["artifacts"], 4);
  EXPECT_TRUE(store["details"]["corrupt"].empty());
}

TEST_F(DoctorTest, BadFlagsAreUsageErrors) {
  EXPECT_EQ(Doctor("--timeout -1").exit_code, 2);
  EXPECT_EQ(Doctor("--no-such-flag").exit_code, 2);
}

}  // namespace
}  // namespace kcache
