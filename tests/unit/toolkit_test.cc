// Loads the real CUDA toolkit ($CUDA_HOME or /usr/local/cuda) with dlopen.
#include "engine/compile/toolkit.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "engine/compile/nvrtc_api.h"
#include "gtest/gtest.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;

bool Has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// A fresh empty directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kcache-toolkit-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(ToolkitTest, LoadsTheInstalledToolkit) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(Toolkit::DefaultRoot());
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();
  const ToolkitIdentity& id = (*toolkit)->identity();
  EXPECT_EQ(id.major, 13);
  EXPECT_TRUE(std::regex_match(id.id, std::regex(R"(nvrtc-13\.[0-9]+\+[0-9a-f]{12})"))) << id.id;
  EXPECT_NE(id.build.find("nvrtc 13."), std::string::npos) << id.build;
  EXPECT_NE(id.build.find("builtins build-id:"), std::string::npos) << id.build;
  EXPECT_NE(id.DisplayName().find("NVRTC 13."), std::string::npos);
  EXPECT_NE(id.DisplayName().find((*toolkit)->root()), std::string::npos);
  EXPECT_GT((*toolkit)->load_micros(), 0);
  RecordProperty("load_micros", std::to_string((*toolkit)->load_micros()));
  std::cout << "Toolkit::Load took " << (*toolkit)->load_micros() << " us; id " << id.id
            << "; build " << id.build << "\n";

  int major = 0, minor = 0;
  ASSERT_EQ((*toolkit)->nvrtc().version(&major, &minor), NVRTC_SUCCESS);
  EXPECT_EQ(major, id.major);
  EXPECT_EQ(minor, id.minor);
  EXPECT_NE((*toolkit)->nvjitlink(), nullptr);
}

TEST(ToolkitTest, SupportedArchsComeFromNvrtc) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(Toolkit::DefaultRoot());
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();
  const std::vector<int>& archs = (*toolkit)->supported_archs();
  EXPECT_TRUE(Has(archs, 75));
  EXPECT_TRUE(Has(archs, 90));
  EXPECT_TRUE(Has(archs, 121));
  EXPECT_FALSE(Has(archs, 70));
  EXPECT_FALSE(Has(archs, 72));
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
}

TEST(ToolkitTest, IncludeOptionsNameExistingToolkitDirs) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(Toolkit::DefaultRoot());
  ASSERT_TRUE(toolkit.ok()) << toolkit.status();
  const std::vector<std::string>& includes = (*toolkit)->include_options();
  ASSERT_FALSE(includes.empty());
  std::string root = (*toolkit)->root();
  EXPECT_EQ(includes[0], "-I" + root + "/include");
  for (const std::string& option : includes) {
    ASSERT_EQ(option.rfind("-I", 0), 0u) << option;
    EXPECT_TRUE(fs::is_directory(option.substr(2))) << option;
  }
  if (fs::is_directory(root + "/include/cccl")) {
    EXPECT_NE(std::find(includes.begin(), includes.end(), "-I" + root + "/include/cccl"),
              includes.end());
  }
}

TEST(ToolkitTest, IdentityIsStableAcrossLoadsAndRootSpellings) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> first = Toolkit::Load(Toolkit::DefaultRoot());
  absl::StatusOr<std::shared_ptr<const Toolkit>> second =
      Toolkit::Load(Toolkit::DefaultRoot() + "/");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*first)->identity().id, (*second)->identity().id);
  EXPECT_EQ((*first)->identity().build, (*second)->identity().build);
  EXPECT_EQ((*first)->root(), (*second)->root());  // trailing slash dropped

  // The same libraries reached through another path are the same toolkit: paths never
  // enter the identity.
  TempDir dir;
  fs::path link = dir.path() / "cuda";
  fs::create_directory_symlink(fs::canonical(Toolkit::DefaultRoot()), link);
  absl::StatusOr<std::shared_ptr<const Toolkit>> linked = Toolkit::Load(link.string());
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ((*linked)->identity().id, (*first)->identity().id);
  EXPECT_EQ((*linked)->root(), link.string());
}

TEST(ToolkitTest, EmptyDirectoryIsFailedPreconditionNamingPathAndCudaHome) {
  TempDir dir;
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(dir.path().string());
  ASSERT_FALSE(toolkit.ok());
  EXPECT_EQ(toolkit.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string message(toolkit.status().message());
  EXPECT_NE(message.find(dir.path().string()), std::string::npos) << message;
  EXPECT_NE(message.find("CUDA_HOME"), std::string::npos) << message;
  EXPECT_NE(message.find("libnvrtc.so not found"), std::string::npos) << message;
}

TEST(ToolkitTest, MissingDirectoryIsFailedPrecondition) {
  TempDir dir;
  std::string missing = (dir.path() / "no-such-cuda").string();
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(missing);
  ASSERT_FALSE(toolkit.ok());
  EXPECT_EQ(toolkit.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(toolkit.status().message().find(missing), absl::string_view::npos) << toolkit.status();
  EXPECT_NE(toolkit.status().message().find("does not exist"), absl::string_view::npos);
}

TEST(ToolkitTest, UnloadableLibnvrtcIsFailedPreconditionNamingTheFile) {
  TempDir dir;
  fs::create_directories(dir.path() / "lib64");
  fs::path fake = dir.path() / "lib64" / "libnvrtc.so.13";
  std::ofstream(fake) << "not a shared library";
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(dir.path().string());
  ASSERT_FALSE(toolkit.ok());
  EXPECT_EQ(toolkit.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(toolkit.status().message().find(fake.string()), absl::string_view::npos)
      << toolkit.status();
}

TEST(ToolkitTest, DefaultRootFollowsCudaHome) {
  const char* saved = getenv("CUDA_HOME");
  std::string saved_value = saved != nullptr ? saved : "";
  setenv("CUDA_HOME", "/opt/elsewhere/cuda", 1);
  EXPECT_EQ(Toolkit::DefaultRoot(), "/opt/elsewhere/cuda");
  unsetenv("CUDA_HOME");
  EXPECT_EQ(Toolkit::DefaultRoot(), "/usr/local/cuda");
  if (saved != nullptr) setenv("CUDA_HOME", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace kcache
