// engine/nvrtc/nvrtc_compile.h: an NVRTC compile's key1 is the same for the same program,
// NVRTC, driver and directory, differs when any of them does (each field on its own), and is
// refused for -arch=native and time macros; the manifest of a record is refused when NVRTC
// read a variable holding -arch=native, and leaves the driver to key1; an outcome decodes to
// what was encoded, and damaged bytes are refused. What a real compile
// records, and the manifest's misses after a header changes, are
// tests/integration/nvrtc_standin_test.cc's.
#include "engine/nvrtc/nvrtc_compile.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

using testing::TempDir;

class NvrtcCompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_.Write("libnvrtc.so.13", "the real NVRTC\n");
    tmp_.Write("libcuda.so.1", "a driver\n");
    program_.source = "extern \"C\" __global__ void k(float* x) { x[0] = VALUE; }\n";
    program_.name = "k.cu";
    program_.headers = {{"value.h", "#define VALUE 1.0f\n"}};
    program_.name_expressions = {"k"};
    program_.options = {"-arch=sm_89", "-DVALUE=2.0f"};
    context_.library = tmp_ / "libnvrtc.so.13";
    context_.major = 13;
    context_.minor = 0;
    context_.cwd = "/work";
    context_.driver = "";
  }

  absl::StatusOr<ObjectKey> Key(const NvrtcProgram& program, const NvrtcContext& context,
                                UncachedReason* reason = nullptr) {
    UncachedReason ignored = UncachedReason::kNone;
    return NvrtcCommandKey(program, context, reason ? reason : &ignored);
  }

  // key1 after `change` to a copy of the program and context.
  CommandKey KeyAfter(const std::function<void(NvrtcProgram&, NvrtcContext&)>& change) {
    NvrtcProgram program = program_;
    NvrtcContext context = context_;
    change(program, context);
    absl::StatusOr<ObjectKey> key = Key(program, context);
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? key->key1 : CommandKey();
  }

  TempDir tmp_;
  NvrtcProgram program_;
  NvrtcContext context_;
};

TEST_F(NvrtcCompileTest, SameCompileSameKey) {
  absl::StatusOr<ObjectKey> key = Key(program_, context_);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(Key(program_, context_)->key1, key->key1);
  EXPECT_EQ(key->source, "k.cu");
  EXPECT_EQ(key->fields.front().first, "nvrtc");
}

TEST_F(NvrtcCompileTest, EachFieldChangesTheKey) {
  CommandKey base = KeyAfter([](NvrtcProgram&, NvrtcContext&) {});
  std::vector<std::pair<std::string, std::function<void(NvrtcProgram&, NvrtcContext&)>>> changes = {
      {"source", [](NvrtcProgram& p, NvrtcContext&) { p.source += "\n"; }},
      {"name", [](NvrtcProgram& p, NvrtcContext&) { p.name = "other.cu"; }},
      {"header content",
       [](NvrtcProgram& p, NvrtcContext&) { p.headers[0].second = "#define VALUE 3\n"; }},
      {"header name", [](NvrtcProgram& p, NvrtcContext&) { p.headers[0].first = "v.h"; }},
      {"a header more",
       [](NvrtcProgram& p, NvrtcContext&) {
         p.headers.push_back({"more.h", ""});
       }},
      {"option", [](NvrtcProgram& p, NvrtcContext&) { p.options[1] = "-DVALUE=3.0f"; }},
      {"option order",
       [](NvrtcProgram& p, NvrtcContext&) { std::swap(p.options[0], p.options[1]); }},
      {"an option more", [](NvrtcProgram& p, NvrtcContext&) { p.options.push_back("-G"); }},
      {"name expression", [](NvrtcProgram& p, NvrtcContext&) { p.name_expressions[0] = "&k"; }},
      {"no name expression", [](NvrtcProgram& p, NvrtcContext&) { p.name_expressions.clear(); }},
      {"NVRTC version", [](NvrtcProgram&, NvrtcContext& c) { c.minor = 2; }},
      {"NVRTC library",
       [this](NvrtcProgram&, NvrtcContext&) { tmp_.Write("libnvrtc.so.13", "another NVRTC\n"); }},
      {"working directory", [](NvrtcProgram&, NvrtcContext& c) { c.cwd = "/elsewhere"; }},
      {"a driver", [this](NvrtcProgram&, NvrtcContext& c) { c.driver = tmp_ / "libcuda.so.1"; }},
  };
  for (const auto& [what, change] : changes) {
    SCOPED_TRACE(what);
    EXPECT_NE(KeyAfter(change), base);
    tmp_.Write("libnvrtc.so.13", "the real NVRTC\n");
  }
  // Framing: where one option ends is keyed.
  EXPECT_NE(
      KeyAfter([](NvrtcProgram& p, NvrtcContext&) { p.options = {"-arch=sm_89-DVALUE=2.0f"}; }),
      base);
}

TEST_F(NvrtcCompileTest, AnotherDriverChangesTheKey) {
  CommandKey with =
      KeyAfter([this](NvrtcProgram&, NvrtcContext& c) { c.driver = tmp_ / "libcuda.so.1"; });
  tmp_.Write("libcuda.so.1", "another driver\n");
  EXPECT_NE(KeyAfter([this](NvrtcProgram&, NvrtcContext& c) { c.driver = tmp_ / "libcuda.so.1"; }),
            with);
}

TEST_F(NvrtcCompileTest, NativeArchIsUncached) {
  for (const std::vector<std::string>& options :
       std::vector<std::vector<std::string>>{{"-arch=native"},
                                             {"--gpu-architecture=native"},
                                             {"-arch", "native"},
                                             {"-std=c++17", "--gpu-architecture", "native"}}) {
    NvrtcProgram program = program_;
    program.options = options;
    UncachedReason reason = UncachedReason::kNone;
    absl::StatusOr<ObjectKey> key = Key(program, context_, &reason);
    EXPECT_FALSE(key.ok()) << options[0];
    EXPECT_EQ(reason, UncachedReason::kNativeTarget) << options[0];
  }
  EXPECT_FALSE(NamesNativeArch({"-arch=sm_90", "-Dnative=1"}));
}

// Whether the clock reaches the output is not told from the text (a program can paste __TIME__
// from pieces): the key is made whatever it spells, and `kcache nvrtc-put` compiles it again
// under another date (nvrtc_cache_test, ClockReachingTheOutputIsNeverStored).
TEST_F(NvrtcCompileTest, TimeMacrosSpelledInMemoryDoNotDecideTheKey) {
  for (int where = 0; where < 2; ++where) {
    NvrtcProgram program = program_;
    (where == 0 ? program.source : program.headers[0].second) += "const char* d = __DATE__;\n";
    UncachedReason reason = UncachedReason::kNone;
    absl::StatusOr<ObjectKey> key = Key(program, context_, &reason);
    ASSERT_TRUE(key.ok()) << key.status();
    EXPECT_NE(key->key1, Key(program_, context_, &reason)->key1);
  }
}

TEST_F(NvrtcCompileTest, UnreadableLibraryIsUncached) {
  NvrtcContext context = context_;
  context.library = tmp_ / "missing.so";
  UncachedReason reason = UncachedReason::kNone;
  EXPECT_FALSE(Key(program_, context, &reason).ok());
  EXPECT_EQ(reason, UncachedReason::kUnreadableInput);
}

TEST(NvrtcNameDirectoryTest, IsTheNamesDirectoryUnlessItIsTheWorkingDirectory) {
  auto of = [](const std::string& name) {
    std::optional<NvrtcNameDirectory> found = NvrtcNameDirectoryOf(name, "/work");
    return found ? absl::StrCat(found->directory, " ", found->base) : std::string("none");
  };
  EXPECT_EQ(of("/tmp/tmpab12cd34/5f3e.cubin.cu"), "/tmp/tmpab12cd34 5f3e.cubin.cu");
  EXPECT_EQ(of("/tmp//x/../y/k.cu"), "/tmp/y k.cu");
  EXPECT_EQ(of("sub/k.cu"), "/work/sub k.cu");
  EXPECT_EQ(of("k.cu"), "none");
  EXPECT_EQ(of("./k.cu"), "none");
  EXPECT_EQ(of("/work/k.cu"), "none");
  EXPECT_EQ(of("/k.cu"), "none");
  EXPECT_EQ(of("/tmp/x/"), "none");
  EXPECT_EQ(of(""), "none");
}

TEST_F(NvrtcCompileTest, AnyDirectoryKeyLeavesOutTheDirectoryOnly) {
  auto any = [this](const std::string& name, const std::string& option = "") {
    NvrtcProgram program = program_;
    program.name = name;
    if (!option.empty()) program.options.push_back(option);
    absl::StatusOr<ObjectKey> key = Key(program, context_);
    EXPECT_TRUE(key.ok()) << key.status();
    std::optional<NvrtcNameDirectory> directory = NvrtcNameDirectoryOf(name, context_.cwd);
    EXPECT_TRUE(directory.has_value()) << name;
    return key.ok() && directory ? NvrtcAnyDirectoryKey(*key, *directory).key1 : CommandKey();
  };
  CommandKey a = any("/tmp/tmpaaaa/k.cu");
  EXPECT_EQ(any("/tmp/tmpbbbbbbbb/k.cu"), a);
  EXPECT_EQ(any("sub/k.cu"), a);
  EXPECT_NE(any("/tmp/tmpaaaa/j.cu"), a);
  EXPECT_NE(any("/tmp/tmpaaaa/k.cu", "-G"), a) << "every other field is keyed as in a name's key";
  // Never a name's key: not the name "k.cu"'s, nor "/tmp/tmpaaaa/k.cu"'s.
  EXPECT_NE(KeyAfter([](NvrtcProgram& p, NvrtcContext&) { p.name = "k.cu"; }), a);
  EXPECT_NE(KeyAfter([](NvrtcProgram& p, NvrtcContext&) { p.name = "/tmp/tmpaaaa/k.cu"; }), a);
}

TEST(NvrtcAnyDirectoryManifestTest, MakesTheDirectorysPathsRelativeToIt) {
  NvrtcNameDirectory name{"/tmp/tmpaaaa", "k.cu"};
  HeaderManifest manifest = {{"/tmp/tmpaaaa/k.cu", "absent"},
                             {"/tmp/tmpaaaa", "absent"},
                             {"/usr/local/cuda/include/cuda_fp16.h", "0123"},
                             {"@cwd@/__nv_name_map", "absent"},
                             {"$NVRTC_APPEND_FLAGS", "=-I/tmp/tmpaaaa/../inc"}};
  auto made = NvrtcAnyDirectoryManifest(manifest, NvrtcContext{.cwd = "/work"}, name);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->first, (HeaderManifest{{"@base1@/k.cu", "absent"},
                                         {"@base1@", "absent"},
                                         {"/usr/local/cuda/include/cuda_fp16.h", "0123"},
                                         {"@cwd@/__nv_name_map", "absent"},
                                         {"$NVRTC_APPEND_FLAGS", "=-I@base1@/../inc"}}));
  EXPECT_FALSE(made->second.directory_exists);
  EXPECT_FALSE(made->second.name_exists);
  // Checked where the program being served is named.
  BaseDirs dirs = NvrtcAnyDirectoryDirs(NvrtcContext{.cwd = "/work"}, {"/tmp/tmpbbbb", "k.cu"});
  EXPECT_EQ(dirs.Resolve(made->first[0].first), "/tmp/tmpbbbb/k.cu");

  manifest[0].second = "exists:file";
  manifest[1].second = "exists:dir";
  made = NvrtcAnyDirectoryManifest(manifest, NvrtcContext{.cwd = "/work"}, name);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->second.directory_exists);
  EXPECT_TRUE(made->second.name_exists);
}

TEST(NvrtcAnyDirectoryManifestTest, RefusedWhenNvrtcLookedAtMoreThanTheNameThere) {
  NvrtcNameDirectory name{"/tmp/tmpaaaa", "k.cu"};
  for (const HeaderManifest& manifest : std::vector<HeaderManifest>{
           {{"/tmp/tmpaaaa/hdr.h", "absent"}},        // a header looked for beside it
           {{"/tmp/tmpaaaa/sub/hdr.h", "0123"}},      // one read
           {{"/tmp/tmpaaaa/k.cu", "0123"}},           // the program's file read
           {{"/tmp/tmpaaaa", "listing:0123"}},        // the directory listed
           {{"/tmp/tmpaaaa/k.cu", "exists:dir"}}}) {  // not a file
    auto made = NvrtcAnyDirectoryManifest(manifest, NvrtcContext{.cwd = "/work"}, name);
    EXPECT_FALSE(made.ok()) << manifest[0].first << " " << manifest[0].second;
  }
}

TEST_F(NvrtcCompileTest, CompileDecodesAsEncoded) {
  NvrtcProgram program = program_;
  program.headers.push_back({"", std::string("\0binary", 7)});
  context_.driver = "/usr/lib/libcuda.so.1";
  std::string bytes = EncodeNvrtcCompile(program, context_);
  auto decoded = DecodeNvrtcCompile(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->first.source, program.source);
  EXPECT_EQ(decoded->first.name, program.name);
  EXPECT_EQ(decoded->first.headers, program.headers);
  EXPECT_EQ(decoded->first.name_expressions, program.name_expressions);
  EXPECT_EQ(decoded->first.options, program.options);
  EXPECT_EQ(decoded->second.library, context_.library);
  EXPECT_EQ(decoded->second.cwd, context_.cwd);
  EXPECT_EQ(decoded->second.driver, context_.driver);
  EXPECT_EQ(decoded->second.major, 13);
  EXPECT_EQ(decoded->second.minor, 0);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(DecodeNvrtcCompile(bytes.substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(DecodeNvrtcCompile(bytes + "x").ok());
}

// A record as the stand-in writes it (client/nvrtc/nvrtc_reads.h).
class NvrtcManifestTest : public ::testing::Test {
 protected:
  absl::StatusOr<HeaderManifest> Manifest(const std::string& record, const Environment& env,
                                          UncachedReason* reason) {
    FileDigests digests("");
    return NvrtcManifest(observe::ParseObservation(record), BaseDirs{tmp_.path(), {}}, env, digests,
                         absl::InfiniteFuture(), reason);
  }
  TempDir tmp_;
};

TEST_F(NvrtcManifestTest, HeadersReadAndLookedForAreInItTheDriverIsNot) {
  tmp_.Write("inc/b/hdr.h", "#define VALUE 2\n");
  std::string record =
      absl::StrCat("g 7 NVRTC_APPEND_FLAGS\n", "T 7 \n", "A 7 ", tmp_ / "inc/a/hdr.h", "\n", "R 7 ",
                   tmp_ / "inc/b/hdr.h", "\n", "l 7 libcuda.so.1\n");
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<HeaderManifest> manifest = Manifest(record, {}, &reason);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  std::string lines;
  for (const auto& [path, fact] : *manifest) absl::StrAppend(&lines, path, " ", fact, "\n");
  EXPECT_NE(lines.find("$NVRTC_APPEND_FLAGS"), std::string::npos) << lines;
  EXPECT_NE(lines.find("inc/b/hdr.h"), std::string::npos) << lines;
  EXPECT_NE(lines.find("inc/a"), std::string::npos) << lines;  // absent: its first missing part
  EXPECT_EQ(lines.find("libcuda"), std::string::npos) << lines;
}

TEST_F(NvrtcManifestTest, ClockReadAndATimeMacroInAHeaderDoNotDecideTheManifest) {
  tmp_.Write("hdr.h", "const char* when = __TIME__;\n");
  std::string read = absl::StrCat("R 7 ", tmp_ / "hdr.h", "\n");
  UncachedReason reason = UncachedReason::kNone;
  absl::StatusOr<HeaderManifest> without = Manifest(read, {}, &reason);
  absl::StatusOr<HeaderManifest> with = Manifest(absl::StrCat("T 7 \n", read), {}, &reason);
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(*with, *without);
}

TEST_F(NvrtcManifestTest, RefusedWhenNvrtcReadNativeArchOrCouldNotLoadALibrary) {
  UncachedReason reason = UncachedReason::kNone;
  Environment env = {{"NVRTC_APPEND_FLAGS", "-std=c++17 -arch=native"}};
  EXPECT_FALSE(Manifest("G 7 NVRTC_APPEND_FLAGS=-std=c++17 -arch=native\n", env, &reason).ok());
  EXPECT_EQ(reason, UncachedReason::kNativeTarget);
  reason = UncachedReason::kNone;
  EXPECT_FALSE(Manifest("l 7 libsomething.so\n", {}, &reason).ok());
  EXPECT_EQ(reason, UncachedReason::kUnreadableInput);
  reason = UncachedReason::kNone;
  EXPECT_FALSE(Manifest(absl::StrCat("W 7 ", tmp_ / "timing.txt", "\n"), {}, &reason).ok());
  EXPECT_EQ(reason, UncachedReason::kKeepTemps);
  reason = UncachedReason::kNone;
  EXPECT_FALSE(Manifest("U 7 syscall 2\tNVRTC made a system call\n", {}, &reason).ok());
  EXPECT_EQ(reason, UncachedReason::kUnreadableInput);
}

NvrtcOutcome SomeOutcome() {
  NvrtcOutcome outcome;
  outcome.result = 0;
  outcome.outputs[0] = {0, 5, 0, std::string("ptx\0!", 5)};
  outcome.outputs[1] = {0, 3, 0,
                        std::string("\x7f"
                                    "EL",
                                    3)};
  outcome.outputs[2] = {3, 0, 3, ""};                    // no LTO-IR: both getters fail
  outcome.outputs[4] = {11, 0, 11, ""};                  // a getter the real NVRTC lacks
  outcome.outputs[5] = {0, 1, 0, std::string(1, '\0')};  // an empty log
  outcome.lowered = {{0, "_Z5scaleIfEvPT_S0_i"}, {10, ""}};
  return outcome;
}

TEST(NvrtcOutcomeTest, DecodesWhatWasEncoded) {
  NvrtcOutcome outcome = SomeOutcome();
  std::string bytes = EncodeNvrtcOutcome(outcome);
  absl::StatusOr<NvrtcOutcome> decoded = DecodeNvrtcOutcome(bytes, 2);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->result, outcome.result);
  for (size_t i = 0; i < kNvrtcOutputCount; ++i) {
    EXPECT_EQ(decoded->outputs[i].size_result, outcome.outputs[i].size_result) << i;
    EXPECT_EQ(decoded->outputs[i].size, outcome.outputs[i].size) << i;
    EXPECT_EQ(decoded->outputs[i].result, outcome.outputs[i].result) << i;
    EXPECT_EQ(decoded->outputs[i].bytes, outcome.outputs[i].bytes) << i;
  }
  EXPECT_EQ(decoded->lowered, outcome.lowered);
}

TEST(NvrtcOutcomeTest, DamagedBytesAreRefused) {
  std::string bytes = EncodeNvrtcOutcome(SomeOutcome());
  // Cut short anywhere.
  for (size_t length = 0; length < bytes.size(); ++length) {
    EXPECT_FALSE(DecodeNvrtcOutcome(bytes.substr(0, length), 2).ok()) << length;
  }
  EXPECT_FALSE(DecodeNvrtcOutcome(bytes + "x", 2).ok());  // bytes past its end
  EXPECT_FALSE(DecodeNvrtcOutcome(bytes, 1).ok());        // another number of name expressions
  std::string magic = bytes;
  magic[0] = 'K';
  EXPECT_FALSE(DecodeNvrtcOutcome(magic, 2).ok());
  // An output that says it succeeded with bytes that are not its size.
  NvrtcOutcome lying = SomeOutcome();
  lying.outputs[0].size = 4096;
  absl::StatusOr<NvrtcOutcome> decoded = DecodeNvrtcOutcome(EncodeNvrtcOutcome(lying), 2);
  EXPECT_FALSE(decoded.ok());
  EXPECT_TRUE(absl::IsDataLoss(decoded.status())) << decoded.status();
}

}  // namespace
}  // namespace kcache::objects
