// `kcache warm --library` with fatbins and a shared object that the real nvcc builds: SASS
// compiled from PTX for the targets a library lacks, nothing where it has SASS, damaged
// fatbins refused with nothing stored, --dry-run, `kcache ls` listing what was built, and an
// installed Python package's libraries found by its name (--package).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/cubin.h"
#include "core/file_io.h"
#include "engine/fatbin/ptx_sass.h"
#include "engine/store/store.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/fatbin_bytes.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

using ::kcache::testing::Contains;
using ::kcache::testing::KcacheCli;
using ::kcache::testing::RunResult;
using ::kcache::testing::TempDir;
namespace fs = std::filesystem;

constexpr char kSource[] =
    R"(extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

constexpr char kSecondSource[] =
    R"(extern "C" __global__ void scale(float a, float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

class WarmLibraryTest : public ::testing::Test {
 protected:
  // nvcc runs once for the suite: a .so and two fatbins (about 3 s on 2 cores).
  static void SetUpTestSuite() {
    nvcc_ = "/usr/local/cuda/bin/nvcc";
    if (const char* home = std::getenv("CUDA_HOME")) nvcc_ = std::string(home) + "/bin/nvcc";
    if (!fs::exists(nvcc_)) return;
    dir_ = new TempDir();
    std::string cu = dir_->Write("axpy.cu", kSource);
    auto nvcc = [&](const std::string& args) {
      RunResult r = ::kcache::testing::Run(nvcc_ + " " + args + " " + cu);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    };
    nvcc("-shared -Xcompiler -fPIC -gencode arch=compute_75,code=compute_75 -o " +
         (*dir_ / "libptx75.so"));
    nvcc("-fatbin -gencode arch=compute_75,code=compute_75 -o " + (*dir_ / "ptx75.fatbin"));
    nvcc("-fatbin --compress-mode=speed -gencode arch=compute_75,code=compute_75 -o " +
         (*dir_ / "ptx75-lz4.fatbin"));
    // Two modules in one library: each .cu's fatbin is loaded (and JIT-compiled) on its own.
    std::string second = dir_->Write("scale.cu", kSecondSource);
    nvcc("-shared -Xcompiler -fPIC -gencode arch=compute_75,code=compute_75 " + second + " -o " +
         (*dir_ / "libtwo.so"));
    nvcc(
        "-fatbin -gencode arch=compute_75,code=compute_75 -gencode arch=compute_89,code=sm_89 "
        "-o " +
        (*dir_ / "sass89.fatbin"));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "no nvcc at " << nvcc_;
    store_ = work_ / "store";
  }

  RunResult Kcache(const std::string& args) {
    return ::kcache::testing::Run(KcacheCli() + " " + args);
  }
  // Package mylib as pip lays one out in work_/site (returned): mylib/lib/libptx75.so.12 (PTX
  // only) and a dist-info whose RECORD holds `record`'s lines.
  fs::path MyLib(const std::string& record) {
    fs::path site = work_ / "site";
    fs::create_directories(site / "mylib" / "lib");
    fs::create_directories(site / "mylib-1.0.dist-info");
    fs::copy_file(*dir_ / "libptx75.so", site / "mylib/lib/libptx75.so.12");
    work_.Write("site/mylib-1.0.dist-info/METADATA",
                "Metadata-Version: 2.1\nName: mylib\nVersion: 1.0\n");
    work_.Write("site/mylib-1.0.dist-info/RECORD", record);
    return site;
  }
  // `kcache warm --package PACKAGE` with work_/site on PYTHONPATH, into store_ (or --dry-run).
  RunResult WarmMyLib(const std::string& package = "mylib", bool dry_run = false) {
    return ::kcache::testing::Run("env PYTHONPATH=" + (work_ / "site") + " " + KcacheCli() +
                                  " warm --package " + package + " --arch 8.6 " +
                                  (dry_run ? "--dry-run" : "--store " + store_));
  }
  // The SASS built from PTX in the store: target -> cubin bytes (checked to verify), one pair per
  // stored cubin.
  std::multimap<std::string, std::string> StoredSass(std::string* library = nullptr) {
    std::multimap<std::string, std::string> out;
    StoreOptions options;
    options.read_only = true;
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore(store_, options);
    if (!store.ok()) return out;
    absl::StatusOr<std::vector<ArtifactMeta>> metas = (*store)->ListAllArtifacts();
    EXPECT_TRUE(metas.ok()) << metas.status();
    for (const ArtifactMeta& m : *metas) {
      if (!fatbin::IsPtxSassArtifact(m)) continue;
      if (library != nullptr) *library = fatbin::PtxSassOriginOf(m).library;
      absl::StatusOr<Artifact> a = (*store)->Get(m.key);
      EXPECT_TRUE(a.ok()) << a.status();
      if (a.ok()) out.emplace(m.key.target.ToString(), a->bytes);
    }
    return out;
  }
  // A copy of ptx75.fatbin with `patch` applied, as `name`.
  std::string Damaged(const std::string& name, const std::function<void(std::string&)>& patch) {
    absl::StatusOr<std::string> bytes = ReadWholeFile(*dir_ / "ptx75.fatbin");
    EXPECT_TRUE(bytes.ok());
    patch(*bytes);
    return work_.Write(name, *bytes);
  }

  static std::string nvcc_;
  static TempDir* dir_;
  TempDir work_;
  std::string store_;
};
std::string WarmLibraryTest::nvcc_;
TempDir* WarmLibraryTest::dir_ = nullptr;

TEST_F(WarmLibraryTest, PtxOnlyLibraryGetsACubinPerTarget) {
  RunResult r =
      Kcache("warm --library " + (*dir_ / "libptx75.so") + " --arch 8.6,8.9 --store " + store_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "built   sm_86      from compute_75")) << r.output;
  EXPECT_TRUE(Contains(r.output, "built   sm_89      from compute_75")) << r.output;
  std::string library;
  std::multimap<std::string, std::string> sass = StoredSass(&library);
  ASSERT_EQ(sass.size(), 2u) << r.output;
  EXPECT_EQ(library, *dir_ / "libptx75.so");
  for (const auto& [target, cubin] : sass) {
    ASSERT_TRUE(IsCudaElf(cubin)) << target;
    uint32_t e_flags;
    std::memcpy(&e_flags, cubin.data() + 0x30, 4);
    EXPECT_EQ(static_cast<int>((e_flags >> 8) & 0xff), target == "sm_86" ? 86 : 89) << target;
    absl::StatusOr<std::vector<std::string>> entries = CubinEntryNames(cubin);
    ASSERT_TRUE(entries.ok()) << entries.status();
    EXPECT_EQ(*entries, std::vector<std::string>{"axpy"});
  }
  // Again: nothing compiled; the same PTX in a raw fatbin, zstd- or LZ4-compressed, has the
  // same key.
  RunResult again =
      Kcache("warm --library " + (*dir_ / "libptx75.so") + " " + (*dir_ / "ptx75.fatbin") + " " +
             (*dir_ / "ptx75-lz4.fatbin") + " --arch 8.6,8.9 --store " + store_);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(Contains(again.output, "entry 0: PTX compute_75 (lz4, ")) << again.output;
  EXPECT_FALSE(Contains(again.output, "built   ")) << again.output;
  EXPECT_TRUE(Contains(again.output, "0 built, 6 already stored")) << again.output;
}

TEST_F(WarmLibraryTest, EachModuleOfALibraryGetsItsOwnCubin) {
  RunResult r =
      Kcache("warm --library " + (*dir_ / "libtwo.so") + " --arch 8.6,8.9 --store " + store_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "8.6 fatbin 1 lacks SASS: builds sm_86 from entry 1")) << r.output;
  std::multimap<std::string, std::string> sass = StoredSass();
  ASSERT_EQ(sass.size(), 4u) << r.output;
  for (const char* target : {"sm_86", "sm_89"}) {
    std::set<std::string> kernels;
    auto [from, to] = sass.equal_range(target);
    for (auto it = from; it != to; ++it) {
      absl::StatusOr<std::vector<std::string>> entries = CubinEntryNames(it->second);
      ASSERT_TRUE(entries.ok()) << entries.status();
      kernels.insert(entries->begin(), entries->end());
    }
    EXPECT_EQ(kernels, (std::set<std::string>{"axpy", "scale"})) << target;
  }
}

TEST_F(WarmLibraryTest, NothingIsBuiltWhereTheLibraryHasSass) {
  RunResult r =
      Kcache("warm --library " + (*dir_ / "sass89.fatbin") + " --arch 8.9 --store " + store_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "8.9   has SASS: entry 1, SASS sm_89")) << r.output;
  EXPECT_TRUE(StoredSass().empty()) << r.output;
}

TEST_F(WarmLibraryTest, DryRunSaysWhatIsMissingAndStoresNothing) {
  RunResult r = Kcache("warm --dry-run --library " + (*dir_ / "sass89.fatbin") + " " +
                       (*dir_ / "libptx75.so") + " --arch 8.6,8.9 --store " + store_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "sass89.fatbin: fatbin, 2 entries")) << r.output;
  EXPECT_TRUE(Contains(r.output, "entry 0: PTX compute_75 (zstd, ")) << r.output;
  EXPECT_TRUE(
      Contains(r.output, "8.6   lacks SASS: would build sm_86 from entry 0, PTX compute_75"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "8.9   has SASS: entry 1, SASS sm_89")) << r.output;
  EXPECT_TRUE(Contains(r.output, "libptx75.so: ELF, 1 entry")) << r.output;
  EXPECT_TRUE(Contains(r.output, "8.9   lacks SASS: would build sm_89 from entry 0")) << r.output;
  EXPECT_FALSE(fs::exists(store_)) << r.output;
}

TEST_F(WarmLibraryTest, DamagedFatbinsAreBadInputAndNothingIsStored) {
  struct Case {
    std::string name;
    std::function<void(std::string&)> patch;
    std::string says;
  };
  std::vector<Case> cases = {
      {"truncated.fatbin", [](std::string& b) { b.resize(b.size() - 20); }, "truncated?"},
      {"magic.fatbin", [](std::string& b) { b[0] = 'X'; }, "neither a fatbin"},
      {"past-end.fatbin",
       [](std::string& b) {
         uint64_t size = uint64_t{1} << 20;
         std::memcpy(b.data() + 16 + 8, &size, 8);  // the entry's payload size
       },
       "runs past the end of the fatbin"},
      {"huge.fatbin",
       [](std::string& b) {
         uint64_t size = uint64_t{1} << 40;
         std::memcpy(b.data() + 16 + 0x38, &size, 8);  // the decompressed size
       },
       "more than the limit of 512 MiB"},
  };
  for (const Case& c : cases) {
    std::string path = Damaged(c.name, c.patch);
    RunResult r = Kcache("warm --library " + path + " --arch 8.6 --store " + store_);
    EXPECT_EQ(r.exit_code, 2) << c.name << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "error: " + path)) << c.name << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, c.says)) << c.name << "\n" << r.output;
  }
  // A shared object whose .nv_fatbin is damaged: its last fatbin declares more than follows.
  absl::StatusOr<std::string> so = ReadWholeFile(*dir_ / "libptx75.so");
  ASSERT_TRUE(so.ok());
  size_t magic = so->rfind(std::string("\x50\xed\x55\xba", 4));
  ASSERT_NE(magic, std::string::npos);
  uint64_t size = uint64_t{1} << 30;
  std::memcpy(so->data() + magic + 8, &size, 8);
  std::string lib = work_.Write("libdamaged.so", *so);
  RunResult r = Kcache("warm --library " + lib + " --arch 8.6 --store " + store_);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "error: " + lib + " (section .nv_fatbin): fatbin at offset "))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "declares 1073741824 bytes of entries")) << r.output;
  EXPECT_TRUE(StoredSass().empty());
  // A bad library does not stop the good ones; the exit code still says it failed.
  RunResult mixed = Kcache("warm --library " + (work_ / "magic.fatbin") + " " +
                           (*dir_ / "ptx75.fatbin") + " --arch 8.6 --store " + store_);
  EXPECT_EQ(mixed.exit_code, 2) << mixed.output;
  EXPECT_EQ(StoredSass().size(), 1u) << mixed.output;
}

TEST_F(WarmLibraryTest, DoctorSaysWhichModulesTheDriverWouldJitAndWhatKcacheHolds) {
  // libptx75.so (axpy) warmed for 8.6; libtwo.so (axpy and scale) not: its axpy module is the
  // same PTX, held under the same module id, and its scale module is held by nobody.
  ASSERT_EQ(Kcache("warm --library " + (*dir_ / "libptx75.so") + " --arch 8.6 --store " + store_)
                .exit_code,
            0);
  testing::DaemonOptions options;
  options.baked = {store_};
  options.extra_flags = {"--no-toolkit"};
  testing::DaemonProcess kcached(options);
  ASSERT_TRUE(kcached.Start().ok()) << kcached.Log();
  std::string libraries = " --library " + (*dir_ / "libtwo.so") + " --library " +
                          (*dir_ / "libptx75.so") + " --library /bin/sh --server " +
                          kcached.address();
  RunResult held = Kcache("doctor" + libraries + " --arch 8.6");
  EXPECT_TRUE(Contains(
      held.output, *dir_ / "libptx75.so" + " on 8.6: 1 module, 1 without SASS, all held by kcache"))
      << held.output;
  EXPECT_TRUE(Contains(held.output, *dir_ / "libtwo.so" +
                                        " on 8.6: 2 modules, 2 without SASS that the driver "
                                        "JIT-compiles at every load in a new pod; kcache holds 1"))
      << held.output;
  EXPECT_TRUE(Contains(held.output, "fix: in the image: kcache warm --library " +
                                        (*dir_ / "libtwo.so") + " --arch 8.6"))
      << held.output;
  EXPECT_TRUE(Contains(held.output, "1 library has no CUDA code")) << held.output;
  EXPECT_EQ(held.exit_code, 1) << held.output;  // libtwo.so's scale module is a problem
  // On 8.9 kcache holds neither library's modules.
  RunResult not_held = Kcache("doctor" + libraries + " --arch 8.9");
  EXPECT_TRUE(Contains(not_held.output, *dir_ / "libtwo.so" + " on 8.9: 2 modules, 2 without "
                                                              "SASS that the driver"))
      << not_held.output;
  // sass89.fatbin has SASS for 8.9.
  RunResult has = Kcache("doctor --library " + (*dir_ / "sass89.fatbin") + " --arch 8.9");
  EXPECT_TRUE(Contains(has.output, "on 8.9: 1 module, each with SASS that runs there"))
      << has.output;
  // --process: what a running process has mapped.
  RunResult mapped = Kcache("doctor --process " + std::to_string(getpid()) + " --arch 8.6");
  EXPECT_TRUE(Contains(mapped.output, "libraries have no CUDA code")) << mapped.output;
  RunResult gone = Kcache("doctor --process 999999999 --arch 8.6");
  EXPECT_TRUE(Contains(gone.output, "cannot read /proc/999999999/maps")) << gone.output;
  EXPECT_EQ(gone.exit_code, 1);
}

TEST_F(WarmLibraryTest, LsListsTheSassPerLibrary) {
  ASSERT_EQ(
      Kcache("warm --library " + (*dir_ / "libptx75.so") + " --arch 8.6,8.9 --store " + store_)
          .exit_code,
      0);
  RunResult ls = Kcache("ls --store " + store_);
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_TRUE(Contains(ls.output, *dir_ / "libptx75.so")) << ls.output;
  EXPECT_TRUE(Contains(ls.output, "compute_75")) << ls.output;
  EXPECT_TRUE(Contains(ls.output, "86,89")) << ls.output;
  EXPECT_TRUE(Contains(ls.output, "2 cubins built from libraries' PTX")) << ls.output;
  RunResult ls_json = Kcache("ls --json --store " + store_);
  ASSERT_EQ(ls_json.exit_code, 0) << ls_json.output;
  nlohmann::json listed = nlohmann::json::parse(ls_json.output);
  ASSERT_EQ(listed.size(), 1u) << ls_json.output;  // one PTX module, no kernels
  EXPECT_EQ(listed[0]["library"], *dir_ / "libptx75.so");
  EXPECT_EQ(listed[0]["from_ptx"], "compute_75");
  ASSERT_EQ(listed[0]["artifacts"].size(), 2u);
  std::set<std::string> targets;
  for (const nlohmann::json& artifact : listed[0]["artifacts"]) {
    EXPECT_EQ(artifact["kind"], "cubin");
    targets.insert(artifact["target"].get<std::string>());
  }
  EXPECT_EQ(targets, (std::set<std::string>{"sm_86", "sm_89"}));
}

// An installed Python package's libraries, found by the package's name through the
// interpreter's importlib.metadata (here a package on PYTHONPATH, as pip lays one out): its
// PTX-only shared object is built from, its files without CUDA code are skipped and counted.
TEST_F(WarmLibraryTest, APackagesLibrariesAreFoundByItsName) {
  if (::kcache::testing::Run("command -v python3").exit_code != 0) GTEST_SKIP() << "no python3";
  fs::path site = MyLib(
      "mylib/__init__.py,,\nmylib/lib/libptx75.so.12,,\n"
      "mylib/_plain.cpython-311-x86_64-linux-gnu.so,,\nmylib-1.0.dist-info/METADATA,,\n"
      "mylib-1.0.dist-info/RECORD,,\n");
  fs::copy_file("/bin/true", site / "mylib/_plain.cpython-311-x86_64-linux-gnu.so");
  work_.Write("site/mylib/__init__.py", "");
  RunResult r = WarmMyLib();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "package mylib: 1 of its 2 shared objects, cubins and fatbins "
                       "carry CUDA code"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "libptx75.so.12")) << r.output;
  EXPECT_FALSE(Contains(r.output, "_plain")) << r.output;
  std::string library;
  std::multimap<std::string, std::string> sass = StoredSass(&library);
  ASSERT_EQ(sass.size(), 1u) << r.output;
  EXPECT_EQ(sass.begin()->first, "sm_86");
  EXPECT_EQ(library, fs::canonical(site / "mylib/lib/libptx75.so.12").string());

  RunResult missing = WarmMyLib("no-such-package", /*dry_run=*/true);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(Contains(missing.output, "package 'no-such-package' is not installed for python3"))
      << missing.output;
}

// RECORD is the package's own text: entries that are absolute or lead out of site-packages (by
// `..` or a link) are not read, only counted, though they name a library with PTX; a file in
// the package that cannot be read is an error of its own, not counted as carrying CUDA code.
TEST_F(WarmLibraryTest, APackagesRecordIsReadOnlyWithinItsInstall) {
  if (::kcache::testing::Run("command -v python3").exit_code != 0) GTEST_SKIP() << "no python3";
  fs::path site = MyLib(absl::StrCat("mylib/lib/libptx75.so.12,,\nmylib/lib/libbroken.so,,\n",
                                     "mylib/lib/liblink.so,,\n../outside/libout.so,,\n",
                                     work_ / "outside", "/libout.so,,\n"));
  fs::create_directories(work_ / "outside");
  fs::copy_file(*dir_ / "libptx75.so", work_ / "outside/libout.so");
  fs::create_symlink(work_ / "outside/libout.so", site / "mylib/lib/liblink.so");
  work_.Write("site/mylib/lib/libbroken.so", std::string("\x7f") + "ELF but nothing more");
  RunResult r = WarmMyLib();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "package mylib: 1 of its 2 shared objects, cubins and fatbins carry CUDA "
                       "code (1 unreadable)"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "package mylib: 3 RECORD entries outside its install not read"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "libbroken.so")) << r.output;
  EXPECT_FALSE(Contains(r.output, "libout.so:")) << r.output;
  std::string library;
  std::multimap<std::string, std::string> sass = StoredSass(&library);
  ASSERT_EQ(sass.size(), 1u) << r.output;
  EXPECT_EQ(library, fs::canonical(site / "mylib/lib/libptx75.so.12").string());
}

// A PTX entry with nothing in it is said to be no PTX, not taken for a source whose options are
// refused ("-O3 is not allowed").
TEST_F(WarmLibraryTest, AnEmptyPtxEntryIsSaidToBeNoPtx) {
  std::string path =
      work_.Write("empty-ptx.fatbin", fatbin::testing::FatbinBytes({fatbin::testing::HandEntry{}}));
  RunResult r = Kcache("warm --library " + path + " --arch 8.6 --store " + store_);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "is not PTX")) << r.output;
  EXPECT_FALSE(Contains(r.output, "is not allowed")) << r.output;
  EXPECT_TRUE(StoredSass().empty());
}

// A FIFO, a character device and a directory are refused before they are opened for reading (a
// FIFO with no writer would hold the open forever), with --dry-run and --store alike.
TEST_F(WarmLibraryTest, WhatIsNotARegularFileIsRefusedBeforeItIsRead) {
  std::string fifo = work_ / "library.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), std::string(work_.path())}) {
    for (const std::string& where : {std::string("--dry-run"), "--store " + store_}) {
      RunResult r = ::kcache::testing::Run("timeout 30 " + KcacheCli() + " warm --library " + path +
                                           " --arch 8.6 " + where);
      EXPECT_EQ(r.exit_code, 2) << path << " " << where << "\n" << r.output;
      EXPECT_TRUE(Contains(r.output, path + " is not a regular file")) << r.output;
    }
  }
  EXPECT_TRUE(StoredSass().empty());
}

TEST_F(WarmLibraryTest, FlagsThatDoNotFitAreBadInput) {
  std::string lib = *dir_ / "libptx75.so";
  EXPECT_EQ(Kcache("warm --library " + lib + " --arch 8.6").exit_code, 2);  // no --store
  EXPECT_EQ(Kcache("warm --library " + lib + " --arch compute_86 --store " + store_).exit_code, 2);
  EXPECT_EQ(Kcache("warm --library " + lib + " --arch 8.6 --server unix:///nonexistent").exit_code,
            2);
  EXPECT_EQ(Kcache("warm --dry-run --arch 8.6 --store " + store_).exit_code, 2);  // nothing to read
}

}  // namespace
}  // namespace kcache
