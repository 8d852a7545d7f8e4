// kcache's libcuda.so.1 stand-in (client/cuda/cuda_standin.c, cuda_cache_abi.h) at load, without
// a GPU: a program (tests/cuda/cuda_load_program.c) loads images through the stand-in, in front
// of a fake driver that records what it was given (tests/cuda/fake_libcuda.c), with a real
// kcached serving the SASS `kcache warm --library` built from a PTX-only fatbin
// (docs/ptx-libraries.md). A PTX-only image is handed to the driver as the stored SASS, in every
// way a module or library is loaded; everything else (SASS for the GPU in the image, a JIT option
// that changes code, a GPU not warmed, devices that differ, no kcached or a hung one, stored SASS
// that does not check (another SM's, no cubin), the cache switched off) reaches the driver as the
// caller's own image; SASS the driver refuses is followed by the caller's image. A load kcached
// holds nothing for is built by kcached for the next.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/file_io.h"
#include "engine/fatbin/fatbin.h"
#include "engine/fatbin/library.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_counters.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::KcacheCli;
using testing::RunResult;
using testing::TempDir;

constexpr char kSource[] =
    R"(extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

// The modes of cuda_load_program, and the driver function each calls.
const std::map<std::string, std::string>& Modes() {
  static const auto* modes = new std::map<std::string, std::string>{
      {"data", "cuModuleLoadData"},           {"dataex", "cuModuleLoadDataEx"},
      {"dataex-log", "cuModuleLoadDataEx"},   {"dataex-maxreg", "cuModuleLoadDataEx"},
      {"fatbinary", "cuModuleLoadFatBinary"}, {"wrapper", "cuModuleLoadFatBinary"},
      {"library", "cuLibraryLoadData"},       {"procaddress", "cuModuleLoadData"}};
  return *modes;
}

std::string Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

std::string StandInDir() { return (fs::path(KcacheCli()).parent_path() / "cuda").string(); }
std::string StandIn() { return StandInDir() + "/libcuda.so.1"; }
std::string FakeDir() { return testing::BinaryPath("tests/fake-cuda"); }
std::string Program() {
  return (fs::read_symlink("/proc/self/exe").parent_path() / "cuda_load_program").string();
}

// One line of the fake driver's log (tests/cuda/fake_libcuda.c).
struct LogLine {
  std::string function, image, kind;
  uint64_t size = 0;
  int sm = 0;
  std::string fnv;
  int result = -1;
};

// One run of cuda_load_program.
struct Loaded {
  RunResult run;
  std::string image;  // the pointer the program passed to the driver, as it printed it
  int result = -1;    // the CUresult the program got
  std::vector<LogLine> log;
  std::string log_text;
  double seconds = 0;
};

std::ostream& operator<<(std::ostream& out, const Loaded& l) {
  return out << "program (exit " << l.run.exit_code << "):\n"
             << l.run.output << "fake driver's log:\n"
             << l.log_text;
}

// How a run is set up: LoadOptions().On("8.6,8.9", 1).Env("KCACHE_CUDA_CACHE=0").
struct LoadOptions {
  LoadOptions& On(std::string devices, int ordinal = 0) {
    cc = std::move(devices);
    device = ordinal;
    return *this;
  }
  LoadOptions& Alone() {
    stand_in = false;
    return *this;
  }
  LoadOptions& Server(std::string address) {
    server = std::move(address);
    return *this;
  }
  LoadOptions& Env(std::string assignments) {
    env = std::move(assignments);
    return *this;
  }

  std::string cc = "8.6";  // FAKE_CUDA_CC
  int device = 0;          // the ordinal whose primary context the program makes current
  bool stand_in = true;    // preloaded, in front of the fake; else the fake alone
  std::string server;      // KCACHE_SERVER; "" = the suite's kcached
  std::string env;         // more NAME=VALUE assignments
};

class CudaStandInTest : public ::testing::Test {
 protected:
  // nvcc runs once for the suite: two fatbins and the PTX; `kcache warm --library` builds
  // ptx75.fatbin's SASS for 8.6 and 8.9 into a store that kcached serves as baked.
  static void SetUpTestSuite() {
    std::string nvcc = "/usr/local/cuda/bin/nvcc";
    if (const char* home = std::getenv("CUDA_HOME")) nvcc = std::string(home) + "/bin/nvcc";
    if (!fs::exists(nvcc)) return;
    dir_ = new TempDir();
    std::string cu = dir_->Write("axpy.cu", kSource);
    for (const std::string& args :
         {"-fatbin -gencode arch=compute_75,code=compute_75 -o " + (*dir_ / "ptx75.fatbin"),
          "-fatbin -gencode arch=compute_75,code=compute_75 -gencode arch=compute_86,code=sm_86 "
          "-o " +
              (*dir_ / "sass86.fatbin"),
          "-ptx -arch=compute_75 -o " + (*dir_ / "ptx75.ptx")}) {
      RunResult r = testing::Run(nvcc + " " + args + " " + cu);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    RunResult warm = testing::Run(KcacheCli() + " warm --library " + (*dir_ / "ptx75.fatbin") +
                                  " --arch 8.6,8.9 --store " + (*dir_ / "baked"));
    ASSERT_EQ(warm.exit_code, 0) << warm.output;
    StoreOptions options;
    options.read_only = true;
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(*dir_ / "baked", options);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::vector<ArtifactMeta>> metas = (*store)->ListAllArtifacts();
    ASSERT_TRUE(metas.ok()) << metas.status();
    for (const ArtifactMeta& m : *metas) {
      if (!fatbin::IsPtxSassArtifact(m)) continue;
      absl::StatusOr<Artifact> a = (*store)->Get(m.key);
      ASSERT_TRUE(a.ok()) << a.status();
      std::string target = m.key.target.ToString();  // sm_86
      dir_->Write(target + ".cubin", a->bytes);
      sass_fnv_[std::stoi(target.substr(3))] = Fnv1a64(a->bytes);
    }
    ASSERT_EQ(sass_fnv_.size(), 2u) << warm.output;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "no nvcc";
    ASSERT_EQ(sass_fnv_.size(), 2u) << "the suite's set-up failed";
    if (!fs::exists(FakeDir() + "/libcuda.so.1") || !fs::exists(Program())) {
      GTEST_SKIP() << "no fake driver or cuda_load_program (built on x86-64 only)";
    }
  }

  // Whether the stand-in is built (not on other processors, nor in sanitizer builds).
  static bool HaveStandIn() {
    return fs::exists(StandIn()) && fs::exists(StandInDir() + "/libkcache-cuda.so");
  }

  // kcached over the baked store, started at the first test that needs it.
  static std::string Server() {
    if (daemon_ == nullptr) {
      testing::DaemonOptions options;
      options.baked = {*dir_ / "baked"};
      options.extra_flags = {"--no-toolkit"};
      daemon_ = new testing::DaemonProcess(options);
      EXPECT_TRUE(daemon_->Start().ok()) << daemon_->Log();
    }
    return daemon_->address();
  }

  std::string File(const std::string& name) { return *dir_ / name; }

  Loaded Load(const std::string& mode, const std::string& file, const LoadOptions& options = {}) {
    std::string log = work_ / ("load" + std::to_string(++runs_) + ".log");
    // A load that hangs is killed after a minute rather than holding the suite.
    std::string env = absl::StrCat(
        "timeout -s KILL 60 env -u LD_PRELOAD -u KCACHE_SERVER -u KCACHE_REAL_LIBCUDA ",
        "-u KCACHE_CUDA_CACHE -u KCACHE_CUDA_TIMEOUT_MS -u KCACHE_UNRESPONSIVE_MS ",
        "FAKE_CUDA_LOG=", log, " FAKE_CUDA_CC=", options.cc, " LD_LIBRARY_PATH=", FakeDir());
    if (options.stand_in) {
      // The test's own state directory: a kcached marked unresponsive (client/launch/
      // unresponsive_mark.h) stays so for this test alone.
      absl::StrAppend(
          &env, " KCACHE_LOG=1 KCACHE_STATE_DIR=", work_ / "state", " LD_PRELOAD=", StandIn(),
          " KCACHE_REAL_LIBCUDA=", FakeDir(),
          "/libcuda.so.1 KCACHE_SERVER=", options.server.empty() ? Server() : options.server);
    }
    Loaded l;
    auto started = std::chrono::steady_clock::now();
    l.run = testing::Run(absl::StrCat(env, " ", options.env, " ", Program(), " ", mode, " ", file,
                                      " ", options.device));
    l.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::istringstream out(l.run.output);
    for (std::string line; std::getline(out, line);) {
      std::istringstream words(line);
      std::string image, result;
      if (line.rfind("image ", 0) == 0 && words >> image >> l.image >> result >> l.result) break;
    }
    absl::StatusOr<std::string> text = ReadWholeFile(log);
    l.log_text = text.ok() ? *text : "(none)\n";
    std::istringstream lines(l.log_text);
    for (LogLine x;
         lines >> x.function >> x.image >> x.kind >> x.size >> x.sm >> x.fnv >> x.result;) {
      l.log.push_back(x);
    }
    return l;
  }

  // The driver was given the caller's image, `kind`, once, and loaded it.
  void ExpectOriginal(const Loaded& l, const std::string& mode, const std::string& file,
                      const std::string& kind) {
    EXPECT_EQ(l.run.exit_code, 0) << l;
    EXPECT_EQ(l.result, 0) << l;
    ASSERT_EQ(l.log.size(), 1u) << l;
    EXPECT_EQ(l.log[0].function, Modes().at(mode)) << l;
    EXPECT_EQ(l.log[0].image, l.image) << "not the caller's image\n" << l;
    EXPECT_EQ(l.log[0].kind, kind) << l;
    absl::StatusOr<std::string> bytes = ReadWholeFile(file);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(l.log[0].fnv, Fnv1a64(*bytes)) << "not the file's bytes\n" << l;
    EXPECT_EQ(l.log[0].result, 0) << l;
  }

  // The driver was given the stored SASS for `sm` instead of the caller's image, and loaded it.
  void ExpectServed(const Loaded& l, const std::string& mode, int sm) {
    EXPECT_EQ(l.run.exit_code, 0) << l;
    EXPECT_EQ(l.result, 0) << l;
    ASSERT_EQ(l.log.size(), 1u) << l;
    ExpectStoredSass(l, l.log[0], mode, sm);
    EXPECT_EQ(l.log[0].result, 0) << l;
  }

  void ExpectStoredSass(const Loaded& l, const LogLine& line, const std::string& mode, int sm) {
    // A cubin goes to cuModuleLoadData even for a cuModuleLoadFatBinary (which takes fatbins);
    // the other loads keep their function (and with it the caller's options).
    bool fatbinary = mode == "fatbinary" || mode == "wrapper";
    EXPECT_EQ(line.function, fatbinary ? "cuModuleLoadData" : Modes().at(mode)) << l;
    EXPECT_NE(line.image, l.image) << "the caller's image, not the stored SASS\n" << l;
    EXPECT_EQ(line.kind, "elf") << l;
    EXPECT_EQ(line.sm, sm) << l;
    EXPECT_EQ(line.fnv, sass_fnv_[sm]) << "not the stored sm_" << sm << " cubin\n" << l;
  }

  static TempDir* dir_;
  static std::map<int, std::string> sass_fnv_;  // SM -> the stored cubin's fnv1a64
  static testing::DaemonProcess* daemon_;
  TempDir work_;
  int runs_ = 0;
};
TempDir* CudaStandInTest::dir_ = nullptr;
std::map<int, std::string> CudaStandInTest::sass_fnv_;
testing::DaemonProcess* CudaStandInTest::daemon_ = nullptr;

#define REQUIRE_STAND_IN()                                                      \
  if (!HaveStandIn()) {                                                         \
    GTEST_SKIP() << "no libcuda.so.1 and libkcache-cuda.so in " << StandInDir() \
                 << " (another processor, or a sanitizer build)";               \
  }

// The harness: the fake alone records, for every mode, the pointer and bytes the program passed.
TEST_F(CudaStandInTest, FakeDriverAloneRecordsTheProgramsImage) {
  for (const auto& [mode, function] : Modes()) {
    SCOPED_TRACE(mode);
    Loaded l = Load(mode, File("ptx75.fatbin"), LoadOptions().Alone());
    ExpectOriginal(l, mode, File("ptx75.fatbin"), mode == "wrapper" ? "wrapper" : "fatbin");
    EXPECT_EQ(l.log[0].size, fs::file_size(File("ptx75.fatbin"))) << l;
  }
  Loaded ptx = Load("data", File("ptx75.ptx"), LoadOptions().Alone());
  ExpectOriginal(ptx, "data", File("ptx75.ptx"), "ptx");
  EXPECT_EQ(ptx.log[0].size, fs::file_size(File("ptx75.ptx"))) << ptx;
}

// The harness: the fake loads a cubin only on a device of its SM, and refuses every ELF with
// FAKE_CUDA_REFUSE_ELF=1.
TEST_F(CudaStandInTest, FakeDriverLoadsCubinsOnlyForTheDevicesSm) {
  Loaded on86 = Load("data", File("sm_86.cubin"), LoadOptions().Alone());
  ExpectOriginal(on86, "data", File("sm_86.cubin"), "elf");
  EXPECT_EQ(on86.log[0].sm, 86) << on86;
  EXPECT_EQ(on86.log[0].size, fs::file_size(File("sm_86.cubin"))) << on86;
  Loaded on89 = Load("data", File("sm_86.cubin"), LoadOptions().On("8.9").Alone());
  EXPECT_EQ(on89.result, 209) << on89;  // CUDA_ERROR_NO_BINARY_FOR_GPU
  Loaded library = Load("library", File("sm_86.cubin"), LoadOptions().On("8.6,8.9").Alone());
  EXPECT_EQ(library.result, 209) << library;
  Loaded refused =
      Load("data", File("sm_86.cubin"), LoadOptions().Alone().Env("FAKE_CUDA_REFUSE_ELF=1"));
  EXPECT_EQ(refused.result, 200) << refused;  // CUDA_ERROR_INVALID_IMAGE
}

TEST_F(CudaStandInTest, PtxOnlyFatbinIsHandedTheStoredSassInEveryMode) {
  REQUIRE_STAND_IN();
  for (int sm : {86, 89}) {
    for (const auto& [mode, function] : Modes()) {
      if (mode == "dataex-maxreg") continue;
      SCOPED_TRACE(absl::StrCat(mode, " on ", sm));
      std::string cc = absl::StrCat(sm / 10, ".", sm % 10);
      ExpectServed(Load(mode, File("ptx75.fatbin"), LoadOptions().On(cc)), mode, sm);
    }
  }
}

// cuModuleLoad* loads for the current context's device: device 1 of an 8.6 and an 8.9 is given
// the sm_89 SASS.
TEST_F(CudaStandInTest, ModuleLoadIsHandedTheSassOfTheCurrentContextsDevice) {
  REQUIRE_STAND_IN();
  for (const char* mode : {"data", "dataex", "fatbinary"}) {
    SCOPED_TRACE(mode);
    ExpectServed(Load(mode, File("ptx75.fatbin"), LoadOptions().On("8.6,8.9", 1)), mode, 89);
  }
}

TEST_F(CudaStandInTest, FatbinWithSassForTheGpuIsLoadedAsGiven) {
  REQUIRE_STAND_IN();
  for (const char* mode : {"data", "fatbinary", "library"}) {
    SCOPED_TRACE(mode);
    ExpectOriginal(Load(mode, File("sass86.fatbin")), mode, File("sass86.fatbin"), "fatbin");
  }
}

// CU_JIT_MAX_REGISTERS changes the code the driver would build; warm built without it.
TEST_F(CudaStandInTest, CodeChangingJitOptionLoadsTheOriginal) {
  REQUIRE_STAND_IN();
  ExpectOriginal(Load("dataex-maxreg", File("ptx75.fatbin")), "dataex-maxreg", File("ptx75.fatbin"),
                 "fatbin");
}

TEST_F(CudaStandInTest, GpuNotWarmedForLoadsTheOriginal) {
  REQUIRE_STAND_IN();
  for (const char* cc : {"8.0", "7.5"}) {
    SCOPED_TRACE(cc);
    ExpectOriginal(Load("data", File("ptx75.fatbin"), LoadOptions().On(cc)), "data",
                   File("ptx75.fatbin"), "fatbin");
  }
}

// A library loads on every device: one SASS cannot serve an 8.6 and an 8.9.
TEST_F(CudaStandInTest, LibraryOnDevicesOfDifferentCcLoadsTheOriginal) {
  REQUIRE_STAND_IN();
  ExpectOriginal(Load("library", File("ptx75.fatbin"), LoadOptions().On("8.6,8.9")), "library",
                 File("ptx75.fatbin"), "fatbin");
}

TEST_F(CudaStandInTest, SassTheDriverRefusesIsFollowedByTheOriginal) {
  REQUIRE_STAND_IN();
  for (const char* mode : {"data", "library"}) {
    SCOPED_TRACE(mode);
    Loaded l = Load(mode, File("ptx75.fatbin"), LoadOptions().Env("FAKE_CUDA_REFUSE_ELF=1"));
    EXPECT_EQ(l.run.exit_code, 0) << l;
    EXPECT_EQ(l.result, 0) << l;
    ASSERT_EQ(l.log.size(), 2u) << l;
    ExpectStoredSass(l, l.log[0], mode, 86);
    EXPECT_EQ(l.log[0].result, 200) << l;
    EXPECT_EQ(l.log[1].function, Modes().at(mode)) << l;
    EXPECT_EQ(l.log[1].image, l.image) << l;
    EXPECT_EQ(l.log[1].kind, "fatbin") << l;
    EXPECT_EQ(l.log[1].result, 0) << l;
  }
}

// kcached answering SASS that does not check, stored under the right key in a store of its own:
// the cubin for another SM (8.9's for an 8.6), or bytes that are no cubin. The driver is given
// the caller's image, once, as without kcache.
TEST_F(CudaStandInTest, StoredSassThatDoesNotCheckLoadsTheOriginal) {
  REQUIRE_STAND_IN();
  absl::StatusOr<std::string> sm89 = ReadWholeFile(File("sm_89.cubin"));
  ASSERT_TRUE(sm89.ok()) << sm89.status();
  const std::string not_a_cubin =
      "\x7f"
      "ELF" +
      std::string(600, 'Z');
  struct Case {
    std::string name;
    const std::string* bytes;  // null: the stored cubin kept (the control: it is served)
  };
  for (const Case& c : {Case{"the stored cubin", nullptr}, Case{"another SM's cubin", &*sm89},
                        Case{"no cubin", &not_a_cubin}}) {
    SCOPED_TRACE(c.name);
    // A copy of the suite's baked store, the sm_86 SASS's bytes replaced.
    std::string store_dir = work_ / ("store-" + std::to_string(++runs_));
    fs::copy(*dir_ / "baked", store_dir, fs::copy_options::recursive);
    if (c.bytes != nullptr) {
      absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(store_dir, StoreOptions());
      ASSERT_TRUE(store.ok()) << store.status();
      absl::StatusOr<std::vector<ArtifactMeta>> metas = (*store)->ListAllArtifacts();
      ASSERT_TRUE(metas.ok()) << metas.status();
      int replaced = 0;
      for (const ArtifactMeta& m : *metas) {
        if (!fatbin::IsPtxSassArtifact(m) || m.key.target.ToString() != "sm_86") continue;
        Artifact wrong{m, *c.bytes};
        wrong.meta.size = c.bytes->size();
        wrong.meta.checksum = PayloadChecksum(*c.bytes);
        ASSERT_TRUE((*store)->Put(wrong).ok());
        ++replaced;
      }
      ASSERT_EQ(replaced, 1);
    }
    testing::DaemonOptions options;
    options.baked = {store_dir};
    options.extra_flags = {"--no-toolkit"};
    testing::DaemonProcess daemon(options);
    ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
    Loaded l = Load("data", File("ptx75.fatbin"), LoadOptions().Server(daemon.address()));
    if (c.bytes == nullptr) {
      ExpectServed(l, "data", 86);
    } else {
      ExpectOriginal(l, "data", File("ptx75.fatbin"), "fatbin");
    }
  }
}

TEST_F(CudaStandInTest, NoKcachedOrAHungOneLoadsTheOriginalWithinSeconds) {
  REQUIRE_STAND_IN();
  Loaded none =
      Load("data", File("ptx75.fatbin"), LoadOptions().Server("unix://" + (work_ / "none.sock")));
  ExpectOriginal(none, "data", File("ptx75.fatbin"), "fatbin");
  EXPECT_LT(none.seconds, 5) << none;

  ExpectServed(Load("data", File("ptx75.fatbin")), "data", 86);  // the control: kcached answers
  ASSERT_TRUE(daemon_->Pause());
  Loaded hung = Load("data", File("ptx75.fatbin"));
  daemon_->Kill(SIGCONT);
  ExpectOriginal(hung, "data", File("ptx75.fatbin"), "fatbin");
  EXPECT_LT(hung.seconds, 5) << hung;
}

TEST_F(CudaStandInTest, CacheSwitchedOffLoadsTheOriginal) {
  REQUIRE_STAND_IN();
  ExpectServed(Load("data", File("ptx75.fatbin")), "data", 86);  // the control
  ExpectOriginal(Load("data", File("ptx75.fatbin"), LoadOptions().Env("KCACHE_CUDA_CACHE=0")),
                 "data", File("ptx75.fatbin"), "fatbin");
}

// PTX text loaded as it is has the key of a fatbin's PTX entry of the same text: the entry's
// own text is handed the stored SASS. `nvcc -ptx`'s text is too when it is the same; CUDA 13.0's
// is not (fatbinary strips the PTX's comments and indentation), so it is loaded as given.
TEST_F(CudaStandInTest, PtxTextIsHandedTheSassOfTheSamePtxInAFatbin) {
  REQUIRE_STAND_IN();
  absl::StatusOr<fatbin::Library> library = fatbin::Library::Read(File("ptx75.fatbin"));
  ASSERT_TRUE(library.ok()) << library.status();
  ASSERT_EQ(library->entries().size(), 1u);
  ASSERT_EQ(library->entries()[0].kind, fatbin::EntryKind::kPtx);
  absl::StatusOr<std::string> entry = fatbin::EntryPayload(library->entries()[0], "ptx75.fatbin");
  ASSERT_TRUE(entry.ok()) << entry.status();
  std::string same = work_.Write("entry.ptx", *entry);
  {
    SCOPED_TRACE("the fatbin's PTX entry's text");
    ExpectServed(Load("data", same), "data", 86);
  }
  absl::StatusOr<std::string> text = ReadWholeFile(File("ptx75.ptx"));
  ASSERT_TRUE(text.ok());
  Loaded nvcc_ptx = Load("data", File("ptx75.ptx"));
  if (*text == *entry) {
    SCOPED_TRACE("nvcc -ptx's text, the same as the fatbin's entry");
    ExpectServed(nvcc_ptx, "data", 86);
  } else {
    SCOPED_TRACE("nvcc -ptx's text, other than the fatbin's entry");
    ExpectOriginal(nvcc_ptx, "data", File("ptx75.ptx"), "ptx");
  }
}

// A load kcached holds no SASS for is left to the driver and its PTX sent to be built (`kcache
// cuda-build-ptx`): kcached, with a toolkit, builds it in the background, and the next process's
// load of the same image is handed that SASS: the same bytes `kcache warm --library` built.
TEST_F(CudaStandInTest, ALoadKcachedHoldsNothingForIsBuiltForTheNextProcess) {
  REQUIRE_STAND_IN();
  testing::DaemonOptions options;
  options.extra_flags = {"--allow-unsandboxed-compiles"};  // the test's own PTX
  testing::DaemonProcess building(options);
  ASSERT_TRUE(building.Start().ok()) << building.Log();
  LoadOptions on_it = LoadOptions().Server(building.address());
  Loaded first = Load("data", File("ptx75.fatbin"), on_it);
  ExpectOriginal(first, "data", File("ptx75.fatbin"), "fatbin");
  EXPECT_TRUE(testing::Contains(first.run.output, "asked kcached to build the SASS of PTX module"))
      << first;
  ASSERT_EQ(testing::WaitDaemonCounter(building, "ptx_builds.built", 1), 1) << building.Log();
  ExpectServed(Load("data", File("ptx75.fatbin"), on_it), "data", 86);
  // Switched off: a miss sends nothing.
  Loaded off =
      Load("data", File("ptx75.fatbin"), LoadOptions(on_it).On("8.0").Env("KCACHE_CUDA_BUILD=0"));
  ExpectOriginal(off, "data", File("ptx75.fatbin"), "fatbin");
  EXPECT_EQ(testing::DaemonCounter(building, "ptx_builds.queued"), 1) << off;
}

// A program that finds any driver function in the toolkit's libcuda finds it in the stand-in.
TEST_F(CudaStandInTest, StandInExportsEveryFunctionOfTheToolkitsStub) {
  REQUIRE_STAND_IN();
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!fs::exists(stub)) GTEST_SKIP() << "no " << stub;
  auto exported = [](const std::string& path) {
    RunResult nm = testing::Run("nm -D --defined-only " + path);
    EXPECT_EQ(nm.exit_code, 0) << nm.output;
    std::set<std::string> names;
    std::istringstream lines(nm.output);
    for (std::string address, type, name; lines >> address >> type >> name;) {
      if (type == "T" || type == "W" || type == "i") names.insert(name.substr(0, name.find('@')));
    }
    return names;
  };
  std::set<std::string> wanted = exported(stub), have = exported(StandIn());
  ASSERT_GT(wanted.size(), 500u);
  std::string missing;
  for (const std::string& name : wanted) {
    if (have.count(name) == 0) absl::StrAppend(&missing, " ", name);
  }
  EXPECT_TRUE(missing.empty()) << "the stand-in lacks:" << missing;
}

}  // namespace
}  // namespace kcache
