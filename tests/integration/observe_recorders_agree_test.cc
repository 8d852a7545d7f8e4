// Both recorders of what a process reads (engine/observe/observe_record.h) give the same record
// for the same calls: tests/observe/read_sequence.c's sequence run under the preload
// (libkcache-observe.so, as a launcher's compile runs) and under the NVRTC stand-in's recorder
// (client/nvrtc/nvrtc_reads.c, hooking the sequence's library as it hooks NVRTC), in one
// directory made the same way for each run.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::BinaryPath;

class ObserveRecordersAgreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_ = BinaryPath("tests/read_sequence_runner");
    library_ = BinaryPath("tests/libkcache_test_read_sequence.so");
    preload_ = BinaryPath("client/cli/libkcache-observe.so");
    for (const std::string& file : {runner_, library_, preload_}) {
      if (!fs::exists(file)) GTEST_SKIP() << file << " is not built (x86-64 only)";
    }
    dir_ = (fs::canonical(tmp_.path()) / "work").string();
  }

  // The directory the sequence runs in, made afresh (the sequence writes in it).
  void MakeWorkDir() {
    fs::remove_all(dir_);
    fs::create_directories(fs::path(dir_) / "dir");
    for (const char* name : {"present", "second", "third"}) {
      std::ofstream(fs::path(dir_) / name) << name;
    }
    fs::create_symlink("present", fs::path(dir_) / "link");
  }

  std::string Environment() const {
    return "env -i PATH=/usr/bin:/bin KCACHE_TEST_SET=value KCACHE_TEST_NATIVE=-arch=native "
           "KCACHE_TEST_LONG=" +
           std::string(9000, 'v') + " ";
  }

  // The records of the sequence's own facts, in order, without their pids: those that name the
  // work directory, its variables or the clock (the runner's own start, libraries and loads are
  // not the sequence's).
  std::vector<std::string> SequenceRecords(const std::string& log) const {
    std::vector<std::string> records;
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
      size_t pid_end = line.find(' ', 2);
      if (line.size() < 3 || line[1] != ' ' || pid_end == std::string::npos) continue;
      std::string record = line.substr(0, 2) + line.substr(pid_end + 1);
      bool ours = record.find(dir_) != std::string::npos ||
                  record.find("KCACHE_TEST_") != std::string::npos || record == "T " ||
                  record.find("\ta path that cannot be made absolute") != std::string::npos;
      if (ours) records.push_back(record);
    }
    return records;
  }

  std::vector<std::string> UnderPreload() {
    MakeWorkDir();
    std::string log = tmp_.Write("observe.log", "");
    testing::RunResult ran = testing::Run("cd '" + dir_ + "' && " + Environment() + "LD_PRELOAD='" +
                                          preload_ + "' KCACHE_OBSERVE_LOG='" + log + "' '" +
                                          runner_ + "' preload '" + library_ + "'");
    EXPECT_EQ(ran.exit_code, 0) << ran.output;
    std::ifstream in(log);
    return SequenceRecords(std::string(std::istreambuf_iterator<char>(in), {}));
  }

  std::vector<std::string> UnderNvrtcRecorder() {
    MakeWorkDir();
    std::string out = tmp_ / "nvrtc.record", err = tmp_ / "nvrtc.err";
    testing::RunResult ran =
        testing::Run("{ cd '" + dir_ + "' && " + Environment() + "'" + runner_ + "' nvrtc '" +
                     library_ + "' >'" + out + "' 2>'" + err + "'; }");
    std::ifstream error(err);
    EXPECT_EQ(ran.exit_code, 0) << std::string(std::istreambuf_iterator<char>(error), {});
    std::ifstream in(out);
    return SequenceRecords(std::string(std::istreambuf_iterator<char>(in), {}));
  }

  testing::TempDir tmp_;
  std::string runner_, library_, preload_, dir_;
};

TEST_F(ObserveRecordersAgreeTest, TheSameCallsGiveTheSameRecordUnderBoth) {
  std::vector<std::string> preload = UnderPreload();
  std::vector<std::string> nvrtc = UnderNvrtcRecorder();
  EXPECT_EQ(preload, nvrtc);

  // What the rules say of each outcome, so that agreeing on nothing, or on a wrong rule, fails.
  std::string d = dir_ + "/";
  std::vector<std::string> expected = {
      "R " + d + "present",
      "A " + d + "absent",
      "K " + d + "second",  // a create-exclusive open that found it there
      "W " + d + "made",
      "F 21\t" + d + "dir",  // opened to write: a directory
      "R " + d + "third",
      "A " + d + "dir/inside",
      "X " + d + "second",
      "A " + d + "present/below",  // ENOTDIR is absent
      "K " + d + "link",
      "X " + d + "dir",
      "A " + d + "nowhere",
      "D " + d + "dir",
      "A " + d + "no-dir",
      "L " + d + "link\tpresent",
      "F 22\t" + d + "third",  // readlink of a file that is not a link
      "P " + d + "link\t" + fs::canonical(fs::path(dir_) / "present").string(),
      "A " + d + "gone",
      "K " + d + "dir",  // mkdir of a directory made before
      "W " + d + "newdir",
      "A " + d + "never",  // unlink of a path that is not there
      "W " + d + "third",
      "G KCACHE_TEST_SET=value",
      "g KCACHE_TEST_UNSET",
      "G KCACHE_TEST_NATIVE=-arch=native",
      "N $KCACHE_TEST_NATIVE\t-arch=native",
      "T ",
      // Too long to record whole: unobservable (the compile is not cached), never cut short.
      "U KCACHE_TEST_LONG\ta variable too long to record",
      "U " + std::string(9000, 'x') + "\ta path that cannot be made absolute",
  };
  EXPECT_EQ(nvrtc, expected);
}

}  // namespace
}  // namespace kcache
