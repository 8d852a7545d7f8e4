// kcache-launch hands a miss to kcache with what it made of the command (the key, the real
// compiler, the lookup: client/launch/handed_miss_memfd.h), through a real kcached on a temp unix
// socket and the real c++: a miss is keyed and listed once and counted once; the compiler's
// processes inherit neither the record's variable nor its descriptor; and a record that is not
// this command's (another working directory or argv, damaged, forged, no descriptor) is
// refused, and kcache then does the full pass, with a correct object.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/launch/handed_miss_record.h"
#include "tests/testutil/daemon_counters.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/launcher.h"
#include "tests/testutil/temp_dir.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::LauncherEnv;
using testing::Outcome;
using testing::OutcomeOf;
using testing::ReadAll;

constexpr char kSource[] = "int answer() { return ANSWER; }\n";
constexpr char kHandedLine[] = "(key and lookup handed over by kcache-launch)";

class LauncherHandedMissTest : public testing::LauncherTest {
 protected:
  void SetUp() override {
    testing::DaemonOptions options;
    options.extra_flags = {"--no-toolkit"};
    daemon_ = std::make_unique<testing::DaemonProcess>(options);
    ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
    remote_ = env_;
    remote_.store.clear();
    remote_.server = daemon_->address();
    src_ = tmp_.Write("src/answer.cpp", kSource);
  }

  std::string Compile(const std::string& launcher = "$KCACHE_LAUNCH") const {
    return absl::StrCat(launcher, " c++ -DANSWER=42 -O2 -c ", src_, " -o answer.o");
  }

  json Counters() const { return testing::DaemonCounters(*daemon_); }

  // Runs `program` with exactly `argv` (argv[0] included) and `env` in tmp_/`dir` (created),
  // `fd` (when >= 0) left open across the exec; its exit code, and its output in *output.
  int Exec(const std::string& dir, const std::string& program, const std::vector<std::string>& argv,
           const std::vector<std::string>& env, std::string* output, int fd = -1) const {
    fs::create_directories(tmp_ / dir);
    std::string out_path = tmp_ / (dir + ".out");
    std::string cwd = tmp_ / dir;
    std::vector<char*> args, vars;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    for (const std::string& var : env) vars.push_back(const_cast<char*>(var.c_str()));
    args.push_back(nullptr);
    vars.push_back(nullptr);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_t pid = fork();
    if (pid == 0) {
      if (chdir(cwd.c_str()) != 0) _exit(126);
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
      if (fd >= 0) fcntl(fd, F_SETFD, 0);
      execve(program.c_str(), args.data(), vars.data());
      _exit(127);
    }
    close(out);
    int status = 0;
    waitpid(pid, &status, 0);
    *output = ReadAll(out_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // A sealed memfd holding `bytes`, as kcache-launch leaves one for kcache (close it).
  static int SealedRecord(const std::string& bytes) {
    int fd = memfd_create("test-record", MFD_ALLOW_SEALING | MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
    return fd;
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  LauncherEnv remote_;
  std::string src_;
};

// (a), (b): a miss through kcache-launch is compiled and stored by kcache with the handed key
// and lookup (its log line says so), and kcached counts one lookup for it, not two; the next
// build hits over the fast path with the same object, one more lookup and one object served.
TEST_F(LauncherHandedMissTest, AMissIsKeyedListedAndCountedOnce) {
  ASSERT_EQ(Build("b1", Compile(), &remote_), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, kHandedLine)) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "kcache: stored")) << last_output_;
  json counters = Counters();
  EXPECT_EQ(counters["objects.lookups"], 1) << counters;
  EXPECT_EQ(counters["objects.stored"], 1) << counters;
  EXPECT_EQ(counters["objects.served"], 0) << counters;
  EXPECT_EQ(counters["objects.turns_held"], 1) << counters;
  ASSERT_EQ(Build("b2", Compile(), &remote_), Outcome::kHit) << last_output_;
  EXPECT_TRUE(testing::SameFile(tmp_ / "b1/answer.o", tmp_ / "b2/answer.o"));
  counters = Counters();
  EXPECT_EQ(counters["objects.lookups"], 2) << counters;
  EXPECT_EQ(counters["objects.served"], 1) << counters;
  // kcache alone (no kcache-launch before it) still keys, lists and counts its own lookup.
  ASSERT_EQ(Build("b3", Compile("$KCACHE"), &remote_), Outcome::kHit) << last_output_;
  EXPECT_EQ(Counters()["objects.lookups"], 3);
}

// (d): the compiler kcache runs for a handed miss sees neither KCACHE_HANDED_MISS nor the
// record's descriptor.
TEST_F(LauncherHandedMissTest, TheCompilerInheritsNeitherTheVariableNorTheDescriptor) {
  std::string wrapper = tmp_.Write("tools/c++",
                                   "#!/bin/sh\n"
                                   "case \" $* \" in *\" -c \"*)\n"
                                   "  echo \"handed variable: ${KCACHE_HANDED_MISS:-none}\" >&2\n"
                                   "  for fd in /proc/$$/fd/*; do\n"
                                   "    echo \"open fd $fd: $(readlink $fd)\" >&2\n"
                                   "  done;;\n"
                                   "esac\n"
                                   "exec c++ \"$@\"\n");
  fs::permissions(wrapper, fs::perms::owner_all);
  std::string command =
      absl::StrReplaceAll(Compile(), {{" c++ ", absl::StrCat(" -- ", wrapper, " ")}});
  ASSERT_EQ(Build("b1", command, &remote_), Outcome::kMiss) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, kHandedLine)) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "handed variable: none")) << last_output_;
  EXPECT_TRUE(testing::Contains(last_output_, "open fd ")) << last_output_;
  EXPECT_FALSE(testing::Contains(last_output_, "memfd:")) << last_output_;
  EXPECT_FALSE(ReadAll(tmp_ / "b1/answer.o").empty());
}

// (c): a genuine record, captured from kcache-launch (a `kcache` beside a copy of it that
// writes the record out), is used by kcache only for its own command: the same argv,
// environment and working directory. Another working directory, another argument, a damaged
// or forged record and a variable naming no descriptor are each refused, and kcache does the
// full pass: a correct object, no wrong key stored (the next build of the command hits).
TEST_F(LauncherHandedMissTest, ARecordIsUsedForItsOwnCommandOnly) {
  fs::create_directories(tmp_ / "launch");
  std::string launch = tmp_ / "launch/kcache-launch";
  fs::copy_file(testing::KcacheLaunch(), launch);
  std::string dumper =
      tmp_.Write("launch/kcache", "#!/bin/sh\ncat /proc/$$/fd/$KCACHE_HANDED_MISS > \"$DUMP\"\n");
  fs::permissions(dumper, fs::perms::owner_all);
  std::string dump = tmp_ / "record.bin";
  std::vector<std::string> env = {absl::StrCat("PATH=", std::getenv("PATH")), "KCACHE_LOG=1",
                                  absl::StrCat("KCACHE_SERVER=", remote_.server),
                                  absl::StrCat("KCACHE_STATE_DIR=", env_.state_dir),
                                  absl::StrCat("DUMP=", dump)};
  std::vector<std::string> argv = {launch, "c++", "-DANSWER=42", "-O2",
                                   "-c",   src_,  "-o",          "answer.o"};
  std::string output;
  ASSERT_EQ(Exec("b1", launch, argv, env, &output), 0) << output;
  std::string record = ReadAll(dump);
  ASSERT_FALSE(record.empty()) << output;
  // Bound to exactly that command (what the hand-over adds to the environment left out).
  Sha256Digest binding = launch::BindCommand(argv, fs::canonical(tmp_ / "b1").string(), env);
  EXPECT_TRUE(launch::DecodeHandedMiss(record, binding).ok());

  // kcache with the record, as kcache-launch would exec it (the same argv[0]), elsewhere.
  auto run_kcache = [&](const std::string& dir, const std::vector<std::string>& args,
                        const std::string& bytes, const std::string& fd_value = "") {
    int fd = bytes.empty() ? -1 : SealedRecord(bytes);
    std::vector<std::string> with = env;
    with.push_back(
        absl::StrCat("KCACHE_HANDED_MISS=", fd_value.empty() ? absl::StrCat(fd) : fd_value));
    EXPECT_EQ(Exec(dir, testing::KcacheCli(), args, with, &output, fd), 0) << output;
    if (fd >= 0) close(fd);
    return OutcomeOf(output);
  };
  // Its own command: used, and not listed again (kcached counts only kcache-launch's lookup).
  EXPECT_EQ(run_kcache("b1", argv, record), Outcome::kMiss) << output;
  EXPECT_TRUE(testing::Contains(output, kHandedLine)) << output;
  EXPECT_EQ(Counters()["objects.lookups"], 1);
  std::string object = ReadAll(tmp_ / "b1/answer.o");
  ASSERT_FALSE(object.empty());

  // The others: refused, and the full pass hits what that compile stored.
  EXPECT_EQ(run_kcache("b2", argv, record), Outcome::kHit) << output;  // another directory
  EXPECT_TRUE(
      testing::Contains(output, "record not used (the handed-miss record is another command's)"))
      << output;
  std::string damaged = record;
  damaged[damaged.size() / 2] ^= 1;
  EXPECT_EQ(run_kcache("b3", argv, damaged), Outcome::kHit) << output;
  EXPECT_TRUE(testing::Contains(output, "damaged")) << output;
  // Forged: a record that would key the command as another (an all-zero key1), for a command
  // it is not bound to.
  objects::HandedMiss forged;
  forged.compiler_path = "/bin/false";
  forged.looked_up = true;
  absl::StatusOr<std::string> forged_bytes =
      launch::EncodeHandedMiss(forged, launch::BindCommand({"c++"}, "/", {}));
  ASSERT_TRUE(forged_bytes.ok());
  EXPECT_EQ(run_kcache("b4", argv, *forged_bytes), Outcome::kHit) << output;
  EXPECT_TRUE(testing::Contains(output, "another command's")) << output;
  EXPECT_EQ(run_kcache("b5", argv, "", "57"), Outcome::kHit) << output;  // no descriptor 57
  EXPECT_TRUE(testing::Contains(output, "is not a sealed record")) << output;
  EXPECT_EQ(run_kcache("b6", argv, "", "0"), Outcome::kHit) << output;  // stdin is not one
  EXPECT_TRUE(testing::Contains(output, "names no record")) << output;
  for (const char* dir : {"b2", "b3", "b4", "b5", "b6"}) {
    EXPECT_EQ(ReadAll(tmp_ / absl::StrCat(dir, "/answer.o")), object) << dir;
  }
  // Another argument in the record's own directory: refused, and compiled as what it is.
  std::vector<std::string> other = argv;
  other[2] = "-DANSWER=43";
  EXPECT_EQ(run_kcache("b1", other, record), Outcome::kMiss) << output;
  EXPECT_TRUE(testing::Contains(output, "another command's")) << output;
  EXPECT_NE(ReadAll(tmp_ / "b1/answer.o"), object);
  EXPECT_EQ(Counters()["objects.lookups"], 7);  // one for each full pass
}

}  // namespace
}  // namespace kcache
