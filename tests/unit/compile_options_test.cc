// The allowlist of NVRTC options a kernel spec may carry.
#include "core/compile_options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kcache {
namespace {

// The refusal for `option` alone; fails the test if it was accepted.
std::string RefusalOf(const std::string& option) {
  absl::Status status = ValidateCompileOptions({option});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << option;
  return std::string(status.message());
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(CompileOptionsTest, EmptyListIsAllowed) { EXPECT_TRUE(ValidateCompileOptions({}).ok()); }

TEST(CompileOptionsTest, EveryAllowlistedSpellingIsAccepted) {
  const std::vector<std::string> allowed = {
      "-std=c++11",
      "-std=c++14",
      "-std=c++17",
      "-std=c++20",
      "--std=c++17",
      "-DFOO",
      "-DFOO=1",
      "-DBLOCK_SIZE=256",
      "-DNAME=a b",
      "--define-macro=FOO=2",
      "-UFOO",
      "--undefine-macro=FOO",
      "--use_fast_math",
      "-use_fast_math",
      "--ftz=true",
      "-ftz=false",
      "--prec-div=false",
      "-prec-div=true",
      "--prec-sqrt=false",
      "-prec-sqrt=true",
      "--fmad=false",
      "-fmad=true",
      "-default-device",
      "--device-as-default-execution-space",
      "-rdc=true",
      "-rdc=false",
      "--relocatable-device-code=true",
      "--extra-device-vectorization",
      "-extra-device-vectorization",
      "-lineinfo",
      "--generate-line-info",
      "--dopt=on",
      "-dopt=on",
      "--restrict",
      "-restrict",
      "-w",
      "--disable-warnings",
      "--maxrregcount=64",
      "-maxrregcount=255",
      "--maxrregcount=1",
      "-Xptxas=-v",
      "--ptxas-options=-v",
  };
  for (const std::string& option : allowed) {
    EXPECT_TRUE(ValidateCompileOptions({option}).ok())
        << option << ": " << ValidateCompileOptions({option});
  }
  EXPECT_TRUE(ValidateCompileOptions(allowed).ok());
}

TEST(CompileOptionsTest, TargetOptionsAreRefusedAsAField) {
  for (const std::string option : {"-arch=sm_80", "-arch", "-archsm_80",
                                   "--gpu-architecture=compute_86", "--gpu-architecture"}) {
    std::string message = RefusalOf(option);
    EXPECT_TRUE(Contains(message, "\"" + option + "\"")) << message;
    EXPECT_TRUE(Contains(message, "target architecture is a field")) << message;
  }
}

TEST(CompileOptionsTest, IncludePathsAreRefused) {
  for (const std::string option : {"-I/etc", "-I", "--include-path=/usr/include"}) {
    std::string message = RefusalOf(option);
    EXPECT_TRUE(Contains(message, "\"" + option + "\"")) << message;
    EXPECT_TRUE(Contains(message, "headers by name")) << message;
  }
}

TEST(CompileOptionsTest, OptionsThatNameOrWriteFilesAreRefused) {
  for (const std::string option :
       {"-fdevice-time-trace=x", "--fdevice-time-trace=/tmp/t.json", "--pch-dir=/tmp",
        "-pch-dir=/tmp", "--create-pch=a.pch", "--use-pch=a.pch", "-pch", "--pch",
        "--time=timing.csv", "-time=-", "-include=/etc/passwd", "--pre-include=x.h"}) {
    std::string message = RefusalOf(option);
    EXPECT_TRUE(Contains(message, "\"" + option + "\"")) << message;
    EXPECT_TRUE(Contains(message, "names or writes a file")) << message;
  }
}

TEST(CompileOptionsTest, DltoIsChosenByTheDaemon) {
  for (const std::string option : {"-dlto", "--dlink-time-opt", "-gen-opt-lto"}) {
    EXPECT_TRUE(Contains(RefusalOf(option), "LTO-IR is chosen by the daemon")) << option;
  }
}

TEST(CompileOptionsTest, SplitFormsAskForTheSingleStringSpelling) {
  // {"-D", "FOO"} would reach NVRTC as two options; the value must be in the same string.
  std::string message = RefusalOf("-D");
  EXPECT_TRUE(Contains(message, "one string")) << message;
  EXPECT_TRUE(Contains(message, "-DNAME")) << message;
  EXPECT_TRUE(Contains(RefusalOf("-Xptxas"), "-Xptxas=-v"));
  EXPECT_TRUE(Contains(RefusalOf("--maxrregcount"), "--maxrregcount=N"));
  EXPECT_TRUE(Contains(RefusalOf("-std"), "-std=c++17"));
  EXPECT_EQ(ValidateCompileOptions({"-D", "FOO"}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompileOptionsTest, BadValuesAreRefusedWithTheExpectedValues) {
  EXPECT_TRUE(Contains(RefusalOf("-std=c++03"), "c++11, c++14, c++17 or c++20"));
  EXPECT_TRUE(Contains(RefusalOf("-std=gnu++17"), "c++11"));
  EXPECT_TRUE(Contains(RefusalOf("--ftz=yes"), "true or false"));
  EXPECT_TRUE(Contains(RefusalOf("-rdc"), "allowlist"));
  EXPECT_TRUE(Contains(RefusalOf("--dopt=maybe"), "takes on"));
  EXPECT_TRUE(Contains(RefusalOf("--maxrregcount=0"), "1 to 255"));
  EXPECT_TRUE(Contains(RefusalOf("--maxrregcount=256"), "1 to 255"));
  EXPECT_TRUE(Contains(RefusalOf("--maxrregcount=+8"), "1 to 255"));
  EXPECT_TRUE(Contains(RefusalOf("-Xptxas=--dont-merge-basicblocks"), "only ptxas option"));
  EXPECT_TRUE(Contains(RefusalOf("-D1FOO"), "C identifier"));
  EXPECT_TRUE(Contains(RefusalOf("-D=1"), "C identifier"));
  EXPECT_TRUE(Contains(RefusalOf("-UFOO=1"), "C identifier"));
}

// NVRTC 13.0 answers "unrecognized option -O3" / "invalid argument for option --dopt: off"
// (checked against libnvrtc 13.0): refused up front instead of failing every compile.
TEST(CompileOptionsTest, OptionsNvrtcRejectsAreRefusedUpFront) {
  for (const std::string option : {"-O0", "-O1", "-O2", "-O3", "--dopt=off", "-dopt=off"}) {
    std::string message = RefusalOf(option);
    EXPECT_TRUE(Contains(message, "\"" + option + "\"")) << message;
    EXPECT_TRUE(Contains(message, "NVRTC 13.0 rejects it")) << message;
  }
}

TEST(CompileOptionsTest, UnknownOptionsAreRefusedListingWhatIsAllowed) {
  for (const std::string option :
       {"-G", "--device-debug", "-frandom-seed=1", "--split-compile=0", "-Ofc=max", "-O4",
        "--modify-stack-limit=false", "-O", "--optimization-info=inline", "foo"}) {
    std::string message = RefusalOf(option);
    EXPECT_TRUE(Contains(message, "\"" + option + "\"")) << message;
  }
  std::string message = RefusalOf("-G");
  EXPECT_TRUE(Contains(message, "allowed: -std=c++{11,14,17,20}")) << message;
}

TEST(CompileOptionsTest, EmptyOptionsAndControlCharactersAreRefused) {
  EXPECT_TRUE(Contains(RefusalOf(""), "must not be empty"));
  EXPECT_TRUE(Contains(RefusalOf("-DFOO=1\n#include </etc/passwd>"), "control characters"));
  EXPECT_TRUE(Contains(RefusalOf(std::string("-w\0-I/etc", 9)), "control characters"));
}

TEST(CompileOptionsTest, TheFirstBadOptionInAListIsNamed) {
  absl::Status status = ValidateCompileOptions({"-DA=1", "-lineinfo", "--pch-dir=/tmp", "-G"});
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(std::string(status.message()), "--pch-dir=/tmp")) << status;
}

}  // namespace
}  // namespace kcache
