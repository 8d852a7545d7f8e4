// One decision, one answer: `kcache get --store` (the engine in process) and `kcache get
// --server` (a real kcached over the same stored set) give the same rule, reason, target and
// bytes — or the same refusal — for every device 7.5 … 12.1, every driver (unknown, 12.8,
// 13.0, 13.1) and several stored sets: plain, `a` and `f` variants, PTX only, and artifacts of
// two toolkits side by side (a 12.8 one made here, since only 13.0 is installed). Then the same
// with compiling allowed, where both compile (deterministic bytes) or both refuse.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/target.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using ::kcache::testing::Contains;
using ::kcache::testing::DaemonOptions;
using ::kcache::testing::DaemonProcess;
using ::kcache::testing::KcacheCli;
using ::kcache::testing::RunResult;
using ::kcache::testing::TempDir;

const char* const kDevices[] = {"7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1"};
const char* const kDrivers[] = {"0", "12080", "13000", "13010"};

// What one path answered, reduced to what must agree.
struct Answer {
  bool ok = false;
  std::string rule, reason, target, kind, bytes;
  std::string error;  // the refusal's message, when !ok
  std::string Describe() const {
    return ok ? rule + " " + kind + " " + target + " (" + reason + "), " +
                    std::to_string(bytes.size()) + " bytes"
              : "refused: " + error;
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Answer Parse(const RunResult& r, const std::string& out_file) {
  Answer a;
  if (r.exit_code != 0) {
    std::string text = r.output;
    size_t at = text.find("kcache: error: ");
    a.error = at == std::string::npos ? text : text.substr(at + 15);
    while (!a.error.empty() && (a.error.back() == '\n' || a.error.back() == ' '))
      a.error.pop_back();
    return a;
  }
  size_t brace = r.output.find('{');
  nlohmann::json j = nlohmann::json::parse(r.output.substr(brace == std::string::npos ? 0 : brace));
  a.ok = true;
  a.rule = j["rule"];
  a.reason = j["reason"];
  a.target = j["target"];
  a.kind = j["kind"];
  a.bytes = ReadFile(out_file);
  return a;
}

class ResolveMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::kcache::testing::WriteTestKernelFiles(dir_);
    manifest_ = dir_.Write("manifest.yaml", ::kcache::testing::kTestManifest);
  }

  RunResult Kcache(const std::string& args) {
    return ::kcache::testing::Run(KcacheCli() + " " + args);
  }

  // A store warmed for `arch` (kcache warm's --arch list).
  std::string Warmed(const std::string& name, const std::string& arch) {
    std::string store = dir_ / name;
    RunResult r = Kcache("warm --arch " + arch + " --store " + store + " " + manifest_);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return store;
  }

  // Adds artifacts "built by NVRTC 12.8" (synthetic bytes, min_driver 12000 / 12080) beside
  // what `store` holds for saxpy.
  void AddToolkit128(const std::string& store_path) {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(store_path);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::vector<KernelRecord>> kernels = (*store)->ListKernels();
    ASSERT_TRUE(kernels.ok());
    for (const KernelRecord& k : *kernels) {
      if (k.spec.name != "saxpy") continue;
      for (const char* target : {"sm_86", "compute_86"}) {
        Artifact a;
        bool ptx = std::string(target).rfind("compute_", 0) == 0;
        a.meta.key = ArtifactKey{k.id, ptx ? ArtifactKind::kPtx : ArtifactKind::kCubin,
                                 *ParseTarget(target), "nvrtc-12.8+synthetic", 0};
        a.meta.kernel_name = k.spec.name;
        a.meta.min_driver = ptx ? 12080 : 12000;
        a.meta.created_unix_ms = 1;  // older than the 13.0 ones: a 13.x driver prefers those
        a.bytes = std::string("NVRTC 12.8 output for ") + target;
        ASSERT_TRUE((*store)->Put(a).ok());
      }
    }
  }

  Answer ViaStore(const std::string& store, const std::string& device, const std::string& driver,
                  const std::string& kernel, const std::string& flags) {
    std::string out = dir_ / "via-store.bin";
    fs::remove(out);
    return Parse(Kcache("get --json --store " + store + " --device " + device + " --driver " +
                        driver + " --kernel " + kernel + " -o " + out + flags),
                 out);
  }

  Answer ViaDaemon(const DaemonProcess& daemon, const std::string& device,
                   const std::string& driver, const std::string& kernel, const std::string& flags) {
    std::string out = dir_ / "via-daemon.bin";
    fs::remove(out);
    return Parse(Kcache("get --json --server " + daemon.address() + " --device " + device +
                        " --driver " + driver + " --kernel " + kernel + " -o " + out + flags),
                 out);
  }

  // Every device x driver for `kernels`: the store path and the daemon agree. Returns how many
  // answers were served (not refused), so a caller can check the matrix is not all refusals.
  int Compare(const std::string& set, const std::string& store, const DaemonProcess& daemon,
              const std::vector<std::string>& kernels, const std::string& store_flags,
              const std::string& server_flags) {
    int served = 0;
    for (const std::string& kernel : kernels) {
      for (const char* device : kDevices) {
        for (const char* driver : kDrivers) {
          Answer cli = ViaStore(store, device, driver, kernel, store_flags);
          Answer via_daemon = ViaDaemon(daemon, device, driver, kernel, server_flags);
          std::string where = set + ": " + kernel + " on " + device + " driver " + driver;
          EXPECT_EQ(cli.ok, via_daemon.ok) << where << "\n  cli:    " << cli.Describe()
                                           << "\n  daemon: " << via_daemon.Describe();
          if (cli.ok && via_daemon.ok) {
            ++served;
            EXPECT_EQ(cli.rule, via_daemon.rule) << where;
            EXPECT_EQ(cli.reason, via_daemon.reason) << where;
            EXPECT_EQ(cli.target, via_daemon.target) << where;
            EXPECT_EQ(cli.kind, via_daemon.kind) << where;
            EXPECT_TRUE(cli.bytes == via_daemon.bytes) << where << ": different bytes";
          } else if (!cli.ok && !via_daemon.ok) {
            EXPECT_EQ(cli.error, via_daemon.error) << where;
          }
        }
      }
    }
    return served;
  }

  TempDir dir_;
  std::string manifest_;
};

TEST_F(ResolveMatrixTest, StoredAnswersAgreeForEveryDeviceDriverAndSet) {
  struct Set {
    std::string name, arch;
    bool toolkit128 = false;
  };
  const std::vector<Set> sets = {
      {"plain", "8.0,8.6"},
      {"variants", "9.0a,10.0f,12.0"},
      {"ptx-only", "compute_75,compute_90"},
      {"two-toolkits", "8.6", true},
  };
  int served = 0;
  for (const Set& set : sets) {
    std::string store = Warmed(set.name, set.arch);
    if (set.toolkit128) AddToolkit128(store);
    // The daemon serves the same set as a baked store and never compiles (--no-toolkit);
    // kcache get --no-compile answers from the store the same way.
    DaemonOptions options;
    options.baked = {store};
    options.extra_flags = {"--no-toolkit"};
    DaemonProcess daemon(options);
    ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
    served += Compare(set.name, store, daemon, {"saxpy", "scale"}, " --no-compile", "");
  }
  EXPECT_GT(served, 50);  // the matrix serves, it does not only refuse
}

TEST_F(ResolveMatrixTest, CompilingAnswersAgreeAndFollowTheDriver) {
  // Two copies of one set: kcache get compiles into its copy, the daemon into its own store.
  std::string cli_store = Warmed("cli", "8.0");
  std::string baked = Warmed("baked", "8.0");
  DaemonOptions options;
  options.baked = {baked};
  DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  int served = 0;
  for (const char* device : {"8.6", "9.0", "12.1"}) {
    for (const char* driver : {"0", "12080", "13000"}) {
      Answer cli = ViaStore(cli_store, device, driver, "saxpy", "");
      Answer via_daemon = ViaDaemon(daemon, device, driver, "saxpy", "");
      std::string where = std::string("saxpy on ") + device + " driver " + driver;
      ASSERT_EQ(cli.ok, via_daemon.ok)
          << where << "\n  cli:    " << cli.Describe() << "\n  daemon: " << via_daemon.Describe();
      if (!cli.ok) {
        EXPECT_EQ(cli.error, via_daemon.error) << where;
        // Only 13.0 is loaded: a 12.8 driver loads nothing stored and nothing it builds.
        EXPECT_EQ(std::string(driver), "12080") << where << ": " << cli.error;
        EXPECT_TRUE(Contains(cli.error,
                             "driver 12.8 cannot load code built by NVRTC 13.0 (needs "
                             "13.0 or newer); load an older toolkit with --toolkit or "
                             "update the driver"))
            << cli.error;
        continue;
      }
      ++served;
      EXPECT_EQ(cli.rule, via_daemon.rule) << where;
      EXPECT_EQ(cli.reason, via_daemon.reason) << where;
      EXPECT_EQ(cli.target, via_daemon.target) << where;
      EXPECT_TRUE(cli.bytes == via_daemon.bytes) << where << ": different bytes";
      // Never PTX when the device's SASS can be built: on 9.0 and 12.1, where only the
      // compute_80 PTX runs, sm_90 / sm_121 are compiled once, then stored; 8.6 runs sm_80.
      EXPECT_EQ(cli.kind, "cubin") << where;
      bool compatible = std::string(device) == "8.6";
      EXPECT_EQ(cli.target,
                compatible ? std::string("sm_80") : "sm_" + std::to_string(ParseSm(device)->arch()))
          << where;
      EXPECT_NE(cli.rule, "ptx_jit") << where;
    }
  }
  EXPECT_EQ(served, 6);
}

}  // namespace
}  // namespace kcache
