// ParseCompilerCommand: what is one cacheable compile, what its key holds, and every reason
// a command is run uncached.
#include "core/compiler_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kcache {
namespace {

ParsedCompilerCommand Nvcc(std::vector<std::string> args) {
  return ParseCompilerCommand(CompilerFamily::kNvcc, args);
}
ParsedCompilerCommand Gcc(std::vector<std::string> args) {
  return ParseCompilerCommand(CompilerFamily::kGcc, args);
}

// The command torch.utils.cpp_extension writes into build.ninja for a .cu file.
std::vector<std::string> TorchNvcc() {
  return {"--generate-dependencies-with-compile",
          "--dependency-output",
          "ext.cuda.o.d",
          "-DTORCH_EXTENSION_NAME=ext",
          "-DTORCH_API_INCLUDE_EXTENSION_H",
          "-isystem",
          "/venv/torch/include",
          "-D__CUDA_NO_HALF_OPERATORS__",
          "--expt-relaxed-constexpr",
          "-gencode=arch=compute_89,code=compute_89",
          "-gencode=arch=compute_89,code=sm_89",
          "--compiler-options",
          "'-fPIC'",
          "-std=c++17",
          "-c",
          "/src/ext.cu",
          "-o",
          "ext.cuda.o"};
}

TEST(CompilerCommandTest, TorchNvccCompileIsCacheable) {
  ParsedCompilerCommand parsed = Nvcc(TorchNvcc());
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.source, "/src/ext.cu");
  EXPECT_EQ(parsed.command.output, "ext.cuda.o");
  EXPECT_EQ(parsed.command.dep_file, "ext.cuda.o.d");
  EXPECT_TRUE(parsed.command.writes_deps);
  EXPECT_FALSE(parsed.command.debug_info);
}

TEST(CompilerCommandTest, TorchCxxCompileIsCacheable) {
  ParsedCompilerCommand parsed =
      Gcc({"-MD", "-MF", "ext.o.d", "-DTORCH_EXTENSION_NAME=ext", "-isystem", "/venv/torch/include",
           "-D_GLIBCXX_USE_CXX11_ABI=1", "-fPIC", "-std=c++17", "-O3", "-c", "/src/ext.cpp", "-o",
           "ext.o"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.source, "/src/ext.cpp");
  EXPECT_EQ(parsed.command.dep_file, "ext.o.d");
}

TEST(CompilerCommandTest, KeyLeavesOutOutputsAndCcbinOnly) {
  std::vector<std::string> args = TorchNvcc();
  args.insert(args.end(), {"-ccbin", "/usr/bin/gcc"});
  ParsedCompilerCommand parsed = Nvcc(args);
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.ccbin, "/usr/bin/gcc");
  for (const std::string& keyed : parsed.command.keyed_args) {
    EXPECT_EQ(keyed.find("ext.cuda.o"), std::string::npos) << keyed;
    EXPECT_EQ(keyed.find("/usr/bin/gcc"), std::string::npos) << keyed;
  }
  std::vector<std::string> other = TorchNvcc();
  other[10] = "-gencode=arch=compute_90,code=sm_90";
  EXPECT_NE(Nvcc(other).command.keyed_args, parsed.command.keyed_args);
}

TEST(CompilerCommandTest, DebugInfoIsNoted) {
  for (const char* flag : {"-g", "-G", "-lineinfo"}) {
    std::vector<std::string> args = TorchNvcc();
    args.push_back(flag);
    EXPECT_TRUE(Nvcc(args).command.debug_info) << flag;
  }
  EXPECT_TRUE(Gcc({"-g2", "-c", "a.cc", "-o", "a.o"}).command.debug_info);
  EXPECT_FALSE(Gcc({"-g0", "-c", "a.cc", "-o", "a.o"}).command.debug_info);
  EXPECT_TRUE(Nvcc({"-Xcompiler", "-g", "-c", "a.cu", "-o", "a.o"}).command.debug_info);
}

struct UncachedCase {
  CompilerFamily family;
  std::vector<std::string> args;
  UncachedReason reason;
};

TEST(CompilerCommandTest, OneSourceSharedObjectIsCached) {
  ParsedCompilerCommand parsed =
      ParseCompilerCommand(CompilerFamily::kGcc, {"k.cpp", "-O3", "-shared", "-fPIC", "-fopenmp",
                                                  "-o", "k.so", "-ltorch", "-L/opt/torch/lib"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.kind, CompilerOutput::kSharedLibrary);
  EXPECT_EQ(parsed.command.source, "k.cpp");
  EXPECT_EQ(parsed.command.output, "k.so");
  // The libraries and their directories are keyed as written.
  EXPECT_NE(
      std::find(parsed.command.keyed_args.begin(), parsed.command.keyed_args.end(), "-ltorch"),
      parsed.command.keyed_args.end());
  EXPECT_NE(std::find(parsed.command.keyed_args.begin(), parsed.command.keyed_args.end(),
                      "-L/opt/torch/lib"),
            parsed.command.keyed_args.end());
}

TEST(CompilerCommandTest, HeaderLanguageWithoutCompileIsAPrecompiledHeader) {
  ParsedCompilerCommand parsed = ParseCompilerCommand(
      CompilerFamily::kGcc, {"-x", "c++-header", "p.h", "-O2", "-o", "p.h.gch"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.kind, CompilerOutput::kPrecompiledHeader);
  EXPECT_EQ(parsed.command.source, "p.h");
  // `-x none` ends the header language: a plain header is then no source.
  EXPECT_EQ(ParseCompilerCommand(CompilerFamily::kGcc,
                                 {"-x", "c++-header", "-x", "none", "p.h", "-o", "p.h.gch"})
                .uncached,
            UncachedReason::kNotACompile);
}

TEST(CompilerCommandTest, NativeTuningIsKeptForTheLauncherToExpand) {
  ParsedCompilerCommand parsed = ParseCompilerCommand(
      CompilerFamily::kGcc, {"-march=native", "-O2", "-mtune=native", "-c", "a.cc", "-o", "a.o"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.native_args,
            (std::vector<std::string>{"-march=native", "-mtune=native"}));
  EXPECT_TRUE(ParseCompilerCommand(CompilerFamily::kGcc, {"-c", "a.cc", "-o", "a.o"})
                  .command.native_args.empty());
}

// The compiler proper gcc runs follows the language: cc1 for C, cc1plus otherwise.
TEST(CompilerCommandTest, LanguageSaysWhichCompilerProperRuns) {
  auto c_language = [](std::vector<std::string> args) {
    ParsedCompilerCommand parsed = ParseCompilerCommand(CompilerFamily::kGcc, args);
    EXPECT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
    return parsed.command.c_language;
  };
  EXPECT_TRUE(c_language({"-c", "a.c", "-o", "a.o"}));
  EXPECT_FALSE(c_language({"-c", "a.cc", "-o", "a.o"}));
  EXPECT_FALSE(c_language({"-c", "a.C", "-o", "a.o"}));
  EXPECT_TRUE(c_language({"-x", "c", "-c", "a.cc", "-o", "a.o"}));
  EXPECT_FALSE(c_language({"-x", "c++", "-c", "a.c", "-o", "a.o"}));
  EXPECT_TRUE(c_language({"-x", "c-header", "a.h", "-o", "a.h.gch"}));
}

// torch's link of an extension: its objects into the module, against torch's libraries.
TEST(CompilerCommandTest, LinkOfObjectsIntoASharedObjectIsCached) {
  ParsedCompilerCommand parsed = ParseCompilerCommand(
      CompilerFamily::kGcc, {"ext.o", "ext_kernel.cuda.o", "-shared", "-L/opt/torch/lib", "-lc10",
                             "-ltorch", "-L/usr/local/cuda/lib64", "-lcudart", "-o", "ext.so"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.kind, CompilerOutput::kLinkedLibrary);
  EXPECT_TRUE(RunsLinker(parsed.command.kind));
  EXPECT_EQ(parsed.command.objects, (std::vector<std::string>{"ext.o", "ext_kernel.cuda.o"}));
  EXPECT_EQ(parsed.command.source, "");
  EXPECT_EQ(CommandSubject(parsed.command), "ext.so");
  // The objects are keyed where they stand among the libraries: link order is meaning.
  EXPECT_EQ(parsed.command.keyed_args.front(), std::string("\x02") + "ext.o");
  EXPECT_EQ(parsed.command.keyed_args[4], "-lc10");
}

TEST(CompilerCommandTest, EachUncachedReason) {
  const CompilerFamily kN = CompilerFamily::kNvcc, kG = CompilerFamily::kGcc;
  const std::vector<UncachedCase> cases = {
      {kG, {"a.o", "b.o", "-o", "app"}, UncachedReason::kNotACompile},
      // Links and queries are not compiles, whatever option of theirs is unknown.
      {kG, {"--version"}, UncachedReason::kNotACompile},
      {kG, {"a.o", "b.cc", "-shared", "-o", "x.so"}, UncachedReason::kNotACompile},
      {kG, {"a.o", "libb.a", "-shared", "-o", "x.so"}, UncachedReason::kNotACompile},
      // A link of objects: the linker told something past the driver, a dependency file asked.
      {kG,
       {"a.o", "-shared", "-Wl,--version-script=v", "-o", "a.so"},
       UncachedReason::kUnknownOption},
      {kG, {"a.o", "-shared", "-MD", "-MF", "a.d", "-o", "a.so"}, UncachedReason::kUnknownOption},
      {kG, {"a.o", "-shared", "-flto", "-o", "a.so"}, UncachedReason::kUnknownOption},
      {kG, {"a.cc", "-shared", "-flto=auto", "-o", "a.so"}, UncachedReason::kUnknownOption},
      {kG, {"a.o", "b.o", "-shared"}, UncachedReason::kNoOutput},
      {kG, {"-E", "a.cc"}, UncachedReason::kPreprocessOnly},
      {kN, {"-M", "a.cu"}, UncachedReason::kPreprocessOnly},
      {kG, {"-S", "-c", "a.cc", "-o", "a.s"}, UncachedReason::kOtherOutput},
      {kN, {"-lib", "a.cu", "-o", "a.a"}, UncachedReason::kOtherOutput},
      {kG, {"-c", "-o", "a.o"}, UncachedReason::kNoSource},
      {kG, {"-c", "a.cc", "b.cc", "-o", "a.o"}, UncachedReason::kSeveralInputs},
      {kG, {"-c", "a.cc", "x.o", "-o", "a.o"}, UncachedReason::kSeveralInputs},
      {kG, {"-c", "-", "-o", "a.o"}, UncachedReason::kStdin},
      {kG, {"-c", "a.cc", "-o", "-"}, UncachedReason::kStdin},
      {kN, {"--keep", "-c", "a.cu", "-o", "a.o"}, UncachedReason::kKeepTemps},
      {kG, {"-save-temps", "-c", "a.cc", "-o", "a.o"}, UncachedReason::kKeepTemps},
      {kG, {"-gsplit-dwarf", "-c", "a.cc", "-o", "a.o"}, UncachedReason::kKeepTemps},
      {kG, {"-fmodules-ts", "-c", "a.cc", "-o", "a.o"}, UncachedReason::kKeepTemps},
      {kN, {"-Xcompiler", "-save-temps", "-c", "a.cu", "-o", "a.o"}, UncachedReason::kKeepTemps},
      {kG, {"@args.rsp"}, UncachedReason::kResponseFile},
      {kN, {"--options-file", "f", "-c", "a.cu", "-o", "a.o"}, UncachedReason::kResponseFile},
      {kG, {"-fprofile-generate", "-c", "a.cc", "-o", "a.o"}, UncachedReason::kProfiling},
      {kG, {"--coverage", "-c", "a.cc", "-o", "a.o"}, UncachedReason::kProfiling},
      {kG, {"-pg", "-c", "a.cc", "-o", "a.o"}, UncachedReason::kProfiling},
      {kN,
       {"-Xcompiler", "'-fprofile-arcs'", "-c", "a.cu", "-o", "a.o"},
       UncachedReason::kProfiling},
      {kG, {"-frobnicate", "-Zq", "-c", "a.cc", "-o", "a.o"}, UncachedReason::kUnknownOption},
      {kN, {"--frobnicate", "-c", "a.cu", "-o", "a.o"}, UncachedReason::kUnknownOption},
      {kG, {"-c", "a.cc"}, UncachedReason::kNoOutput},
      // A shared object from one source, but the linker told something past the driver.
      {kG, {"a.cc", "-shared", "-Wl,-Map=a.map", "-o", "a.so"}, UncachedReason::kUnknownOption},
      {kG, {"a.cc", "-shared", "-fuse-ld=lld", "-o", "a.so"}, UncachedReason::kUnknownOption},
      {kG, {"a.cc", "-shared", "-Xlinker", "-T", "-o", "a.so"}, UncachedReason::kUnknownOption},
      {kG, {"a.cc", "b.cc", "-shared", "-o", "a.so"}, UncachedReason::kNotACompile},
      {kG, {"-x", "c++-header", "a.h", "b.h", "-o", "a.h.gch"}, UncachedReason::kNotACompile},
      // nvcc does not link or precompile headers through the launcher.
      {kN, {"a.cu", "-shared", "-o", "a.so"}, UncachedReason::kNotACompile},
      // What this machine's CPU or GPU decides, where the key cannot see which.
      {kN,
       {"-Xcompiler", "-O3,-march=native", "-c", "a.cu", "-o", "a.o"},
       UncachedReason::kNativeTarget},
      {kN, {"-arch=native", "-c", "a.cu", "-o", "a.o"}, UncachedReason::kNativeTarget},
      {kN,
       {"--gpu-architecture", "native", "-c", "a.cu", "-o", "a.o"},
       UncachedReason::kNativeTarget},
  };
  for (const UncachedCase& c : cases) {
    ParsedCompilerCommand parsed = ParseCompilerCommand(c.family, c.args);
    EXPECT_EQ(parsed.uncached, c.reason)
        << c.args[0] << ": got " << UncachedReasonName(parsed.uncached) << " (" << parsed.detail
        << ")";
  }
}

// A hit writes its dependency file for this command's output: the parser notes whether the
// targets were given (-MT, -MQ; then they are keyed) and whether -MP asks for phony targets.
TEST(CompilerCommandTest, DependencyTargetsAndPhonyTargetsAreNoted) {
  ParsedCompilerCommand plain = Gcc({"-MD", "-MF", "a.d", "-c", "a.cc", "-o", "a.o"});
  EXPECT_FALSE(plain.command.dep_targets_given);
  EXPECT_FALSE(plain.command.phony_deps);
  for (std::vector<std::string> targets :
       {std::vector<std::string>{"-MT", "x"}, {"-MQ", "x"}, {"-MTx"}}) {
    targets.insert(targets.end(), {"-MD", "-MF", "a.d", "-MP", "-c", "a.cc", "-o", "a.o"});
    ParsedCompilerCommand parsed = Gcc(targets);
    ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
    EXPECT_TRUE(parsed.command.dep_targets_given) << targets[0];
    EXPECT_TRUE(parsed.command.phony_deps) << targets[0];
    EXPECT_NE(std::find(parsed.command.keyed_args.begin(), parsed.command.keyed_args.end(),
                        targets[0] == "-MTx" ? "-MTx" : targets[0] + "\x01x"),
              parsed.command.keyed_args.end());
  }
  ParsedCompilerCommand nvcc = Nvcc({"-MD", "-MF", "a.d", "-MT", "x",
                                     "--generate-dependency-targets", "-c", "a.cu", "-o", "a.o"});
  ASSERT_EQ(nvcc.uncached, UncachedReason::kNone) << nvcc.detail;
  EXPECT_TRUE(nvcc.command.dep_targets_given);
  EXPECT_TRUE(nvcc.command.phony_deps);
}

TEST(CompilerCommandTest, NamedTargetsAreCacheable) {
  EXPECT_EQ(Gcc({"-march=x86-64-v3", "-mtune=generic", "-c", "a.cc", "-o", "a.o"}).uncached,
            UncachedReason::kNone);
  EXPECT_EQ(Nvcc({"-arch=sm_89", "-c", "a.cu", "-o", "a.o"}).uncached, UncachedReason::kNone);
  EXPECT_EQ(Nvcc({"-arch=all-major", "-c", "a.cu", "-o", "a.o"}).uncached, UncachedReason::kNone);
}

TEST(CompilerCommandTest, UserOnlyDependenciesAreNotedToBeServedAsAll) {
  ParsedCompilerCommand parsed = Gcc({"-MMD", "-MF", "a.o.d", "-c", "a.cc", "-o", "a.o"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_TRUE(parsed.command.writes_deps);
  EXPECT_EQ(parsed.command.user_only_deps_arg, 0);
  parsed = Nvcc(
      {"-c", "--generate-nonsystem-dependencies-with-compile", "-MF", "a.d", "a.cu", "-o", "a.o"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.user_only_deps_arg, 1);
}

TEST(CompilerCommandTest, EveryReasonHasADistinctName) {
  std::set<absl::string_view> names;
  for (int i = 0; i < kUncachedReasonCount; ++i) {
    absl::string_view name = UncachedReasonName(static_cast<UncachedReason>(i));
    EXPECT_FALSE(name.empty()) << i;
    EXPECT_NE(name, "unknown") << i;
    EXPECT_TRUE(names.insert(name).second) << i << " has the name of another reason: " << name;
  }
  EXPECT_EQ(UncachedReasonName(static_cast<UncachedReason>(kUncachedReasonCount)), "unknown");
}

// Lines as nvcc 13's --help prints them (and one of each odd shape it has).
constexpr char kNvccHelp[] =
    "Options for specifying the compilation phase\n"
    "============================================\n"
    "--cubin                                             (-cubin)                    \n"
    "        Compile all .cu/.gpu/.ptx input files to device-only .cubin files.\n"
    "--output-file <file>                                (-o)                        \n"
    "--static-global-template-stub {true|false}          (-static-global-template-stub)\n"
    "--compress-mode [default,size,speed,balance,none]   (-compress-mode)            \n"
    "--entries entry,...                                 (-e)                        \n"
    "--no-align-double                                   --no-align-double           \n"
    "--jobserver                                         (-jobserver)                \n"
    "--threads <number>                                  (-t)                        \n";

TEST(CompilerCommandTest, NvccHelpGivesEachOptionsSpellingsAndWhetherItTakesAValue) {
  CompilerOptionTable table = ParseNvccHelp(kNvccHelp);
  auto takes = [&](const char* name) {
    bool value = false;
    EXPECT_TRUE(table.Find(name, &value)) << name;
    return value;
  };
  EXPECT_FALSE(takes("cubin"));
  EXPECT_TRUE(takes("output-file"));
  EXPECT_TRUE(takes("o"));
  EXPECT_TRUE(takes("static-global-template-stub"));
  EXPECT_TRUE(takes("compress-mode"));
  EXPECT_TRUE(takes("entries"));
  EXPECT_TRUE(takes("e"));
  EXPECT_FALSE(takes("no-align-double"));
  EXPECT_FALSE(takes("jobserver"));
  EXPECT_TRUE(takes("t"));
  bool value = false;
  EXPECT_FALSE(table.Find("Options", &value));
  EXPECT_FALSE(table.Find("compile", &value));
  EXPECT_TRUE(ParseNvccHelp("nvcc: fatal error\n").options.empty());
}

// FlashInfer's options, unknown to the parser: refused alone, keyed as written (with their
// values) once nvcc's own table says how they parse.
TEST(CompilerCommandTest, OptionsOnlyTheCompilersTableKnowsAreKeyedAsWritten) {
  std::vector<std::string> args = {"-static-global-template-stub=false",
                                   "--compress-mode=size",
                                   "--jobserver",
                                   "--entries",
                                   "k1,k2",
                                   "-c",
                                   "k.cu",
                                   "-o",
                                   "k.o"};
  EXPECT_EQ(Nvcc(args).uncached, UncachedReason::kUnknownOption);
  CompilerOptionTable table = ParseNvccHelp(kNvccHelp);
  ParsedCompilerCommand parsed = ParseCompilerCommand(CompilerFamily::kNvcc, args, &table);
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.source, "k.cu");
  EXPECT_EQ(parsed.command.output, "k.o");
  const std::vector<std::string>& keyed = parsed.command.keyed_args;
  for (const std::string& expected :
       {std::string("-static-global-template-stub=false"), std::string("--compress-mode=size"),
        std::string("--jobserver"), std::string("--entries\x01k1,k2")}) {
    EXPECT_NE(std::find(keyed.begin(), keyed.end(), expected), keyed.end()) << expected;
  }
  args[0] = "-static-global-template-stub=true";
  EXPECT_NE(ParseCompilerCommand(CompilerFamily::kNvcc, args, &table).command.keyed_args, keyed);
}

// What the table does not name, and a value given to a flag it names, are still refused; the
// table never overrides what the parser knows (-o stays the output).
TEST(CompilerCommandTest, TheTableNeitherGuessesNorOverridesKnownOptions) {
  CompilerOptionTable table = ParseNvccHelp(kNvccHelp);
  auto parse = [&](std::vector<std::string> args) {
    return ParseCompilerCommand(CompilerFamily::kNvcc, args, &table);
  };
  EXPECT_EQ(parse({"--made-up", "-c", "k.cu", "-o", "k.o"}).uncached,
            UncachedReason::kUnknownOption);
  EXPECT_EQ(parse({"--jobserver=4", "-c", "k.cu", "-o", "k.o"}).uncached,
            UncachedReason::kUnknownOption);
  EXPECT_EQ(parse({"-dlink", "-c", "k.cu", "-o", "k.o"}).uncached, UncachedReason::kOtherOutput);
  ParsedCompilerCommand parsed = parse({"--jobserver", "-c", "k.cu", "--output-file", "k.o"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.output, "k.o");
}

// DeepGEMM's JIT compiles each kernel with -cubin: one source's device code at -o, cached
// as its own kind (the option keyed); with -c as well, an object.
TEST(CompilerCommandTest, DeviceCodeOfOneSourceIsCacheable) {
  for (const char* mode : {"-cubin", "-ptx", "-fatbin", "-ltoir", "--cubin"}) {
    ParsedCompilerCommand parsed =
        Nvcc({"/cache/kernel.cu", "-o", "/cache/tmp/1234", "-std=c++20",
              "--ptxas-options=--register-usage-level=10", "-I/dg/include",
              "--gpu-architecture=sm_90a", "--compiler-options=-fPIC,-O3", mode, "-O3",
              "--expt-relaxed-constexpr", "--expt-extended-lambda"});
    ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << mode << ": " << parsed.detail;
    EXPECT_EQ(parsed.command.kind, CompilerOutput::kDeviceCode) << mode;
    EXPECT_EQ(parsed.command.source, "/cache/kernel.cu");
    EXPECT_EQ(parsed.command.output, "/cache/tmp/1234");
    const std::vector<std::string>& keyed = parsed.command.keyed_args;
    EXPECT_NE(std::find(keyed.begin(), keyed.end(),
                        absl::StrCat("-", absl::StripPrefix(absl::StripPrefix(mode, "-"), "-"))),
              keyed.end())
        << mode;
  }
  EXPECT_EQ(Nvcc({"-cubin", "-c", "k.cu", "-o", "k.o"}).command.kind, CompilerOutput::kObject);
  EXPECT_EQ(Nvcc({"-cubin", "k.cu"}).uncached, UncachedReason::kNoOutput);
  EXPECT_EQ(Nvcc({"-cubin", "a.cu", "b.cu", "-o", "k.cubin"}).uncached,
            UncachedReason::kSeveralInputs);
}

// What kcached counts an uncached command by: the deciding option's name, never its value.
TEST(CompilerCommandTest, UncachedOptionNameIsTheOptionWithoutItsValue) {
  EXPECT_EQ(UncachedOptionName("-fprofile-use=/data/x.gcda"), "-fprofile-use");
  EXPECT_EQ(UncachedOptionName("-Wa,-adhln=listing"), "-Wa");
  EXPECT_EQ(UncachedOptionName("--keep"), "--keep");
  EXPECT_EQ(UncachedOptionName("@/tmp/args.rsp"), "@");
  EXPECT_EQ(UncachedOptionName("no -c"), "");
  EXPECT_EQ(UncachedOptionName("b.cu"), "");
  EXPECT_EQ(UncachedOptionName("-"), "");
  EXPECT_EQ(UncachedOptionName(Gcc({"-fplugin=x.so", "-c", "a.c", "-o", "a.o"}).detail),
            "-fplugin");
}

// Options that name programs or files the driver uses (conda's -B compiler_compat, -specs=,
// --sysroot, pass-throughs to the preprocessor or assembler) are keyed as written, with their
// values; what they make the compile read or run is observed by the launcher.
TEST(CompilerCommandTest, OptionsNamingProgramsAndFilesAreKeyedWithTheirValues) {
  ParsedCompilerCommand parsed =
      Gcc({"-pthread", "-B", "/conda/compiler_compat", "-specs=/x/y.specs", "--sysroot", "/sys",
           "-Xassembler", "--noexecstack", "-Xpreprocessor", "-DZ", "-iwithprefixbefore", "inc",
           "-c", "a.cc", "-o", "a.o"});
  ASSERT_EQ(parsed.uncached, UncachedReason::kNone) << parsed.detail;
  EXPECT_EQ(parsed.command.source, "a.cc");
  const std::vector<std::string>& keyed = parsed.command.keyed_args;
  for (const char* expected :
       {"-B\x01/conda/compiler_compat", "-specs=/x/y.specs", "--sysroot\x01/sys",
        "-Xassembler\x01--noexecstack", "-Xpreprocessor\x01-DZ", "-iwithprefixbefore\x01inc"}) {
    EXPECT_NE(std::find(keyed.begin(), keyed.end(), expected), keyed.end()) << expected;
  }
  EXPECT_EQ(Gcc({"-B/other", "-c", "a.cc", "-o", "a.o"}).uncached, UncachedReason::kNone);
}

}  // namespace
}  // namespace kcache
