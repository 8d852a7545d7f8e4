// A fresh temporary directory per test, removed when the test ends.
#ifndef KCACHE_TESTS_TESTUTIL_TEMP_DIR_H_
#define KCACHE_TESTS_TESTUTIL_TEMP_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kcache::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kcache-test.XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

  // Writes `content` to path()/name (creating folders) and returns the full path.
  std::string Write(const std::string& name, const std::string& content) const {
    std::filesystem::path file = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << content;
    return file.string();
  }

 private:
  std::string path_;
};

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_TEMP_DIR_H_
