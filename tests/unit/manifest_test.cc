#include "core/manifest.h"

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

using ::kcache::testing::TempDir;

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("k.cu", "#include \"common.cuh\"\nextern \"C\" __global__ void k() {}\n");
    dir_.Write("common.cuh", "#pragma once\n");
  }
  absl::StatusOr<Manifest> Parse(const std::string& yaml) {
    return LoadManifest(dir_.Write("manifest.yaml", yaml));
  }
  // The error message of a manifest that must not parse.
  std::string ErrorOf(const std::string& yaml) {
    absl::StatusOr<Manifest> m = Parse(yaml);
    EXPECT_FALSE(m.ok()) << "parsed but should not have:\n" << yaml;
    return m.ok() ? "" : std::string(m.status().message());
  }
  TempDir dir_;
};

TEST_F(ManifestTest, ParsesAllFieldsAndReadsFilesRelativeToTheManifest) {
  absl::StatusOr<Manifest> m = Parse(R"(version: 1
kernels:
  - name: k
    source: k.cu
    headers: [common.cuh]
    options: [-std=c++17, -DN=4]
    name_expressions: ["f<float>"]
    min_arch: 8.0
    max_arch: 12.1
    cost: 250
    ltoir: true
)");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->kernels.size(), 1u);
  const ManifestKernel& k = m->kernels[0];
  EXPECT_EQ(k.record.spec.name, "k");
  EXPECT_NE(k.record.spec.source.find("__global__"), std::string::npos);
  EXPECT_EQ(k.record.spec.headers.at("common.cuh"), "#pragma once\n");
  EXPECT_EQ(k.record.spec.options, (std::vector<std::string>{"-std=c++17", "-DN=4"}));
  EXPECT_EQ(k.record.spec.name_expressions, (std::vector<std::string>{"f<float>"}));
  EXPECT_EQ(k.record.arch.min_arch, 80);
  EXPECT_EQ(k.record.arch.max_arch, 121);
  EXPECT_EQ(k.cost_ms, 250);
  EXPECT_TRUE(k.record.want_ltoir);
  EXPECT_EQ(k.record.id, ComputeKernelId(k.record.spec));
}

TEST_F(ManifestTest, VariantsAreSeparateKernelsWithTheirOwnIds) {
  absl::StatusOr<Manifest> m = Parse(R"(version: 1
kernels:
  - name: attention
    source: k.cu
    options: [-std=c++17]
    variants:
      - name: fp16_accum
        options: [-DKCACHE_ATTN_ACCUM_HALF=1]
)");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->kernels.size(), 2u);
  const ManifestKernel* base = m->Find("attention");
  const ManifestKernel* variant = m->Find("attention.fp16_accum");
  ASSERT_NE(base, nullptr);
  ASSERT_NE(variant, nullptr);
  EXPECT_EQ(variant->record.spec.options,
            (std::vector<std::string>{"-std=c++17", "-DKCACHE_ATTN_ACCUM_HALF=1"}));
  EXPECT_NE(base->record.id, variant->record.id);
}

TEST_F(ManifestTest, ErrorsNameFileLineAndField) {
  std::string error = ErrorOf(R"(version: 1
kernels:
  - name: k
    source: k.cu
    min_arch: 8.x
)");
  EXPECT_NE(error.find("manifest.yaml:5:15: kernels[0].min_arch: '8.x' is not an architecture"),
            std::string::npos)
      << error;
}

TEST_F(ManifestTest, UnknownFieldIsNamed) {
  std::string error =
      ErrorOf("version: 1\nkernels:\n  - name: k\n    source: k.cu\n    min_archh: 8.0\n");
  EXPECT_NE(error.find(":5:5: kernels[0].min_archh: unknown field"), std::string::npos) << error;
}

TEST_F(ManifestTest, MissingSourceFileIsNamed) {
  std::string error = ErrorOf("version: 1\nkernels:\n  - name: k\n    source: nope.cu\n");
  EXPECT_NE(error.find("kernels[0].source: cannot read"), std::string::npos) << error;
  EXPECT_NE(error.find("nope.cu"), std::string::npos) << error;
}

TEST_F(ManifestTest, DisallowedOptionIsRefusedWithItsLine) {
  std::string error =
      ErrorOf("version: 1\nkernels:\n  - name: k\n    source: k.cu\n    options: [-arch=sm_80]\n");
  EXPECT_NE(error.find(":5:"), std::string::npos) << error;
  EXPECT_NE(error.find("kernels[0].options"), std::string::npos) << error;
  EXPECT_NE(error.find("-arch"), std::string::npos) << error;
}

TEST_F(ManifestTest, RejectsBadStructure) {
  EXPECT_NE(ErrorOf("version: 2\nkernels: []\n").find("version: must be 1"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels: []\n").find("non-empty list"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels:\n  - source: k.cu\n").find("missing field 'name'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels:\n  - name: Bad-Name\n    source: k.cu\n")
                .find("not a valid name"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(
          "version: 1\nkernels:\n  - name: k\n    source: k.cu\n  - name: k\n    source: k.cu\n")
          .find("used twice"),
      std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels:\n  - name: k\n    source: k.cu\n    min_arch: 9.0\n    "
                    "max_arch: 8.0\n")
                .find("below min_arch"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels: [\n").find("not valid YAML"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels:\n  - name: k\n    source: k.cu\n    ltoir: maybe\n")
                .find("true or false"),
            std::string::npos);
}

// Found while writing tests/fuzz/manifest_fuzzer: a mapping key that is not a scalar made yaml-cpp
// throw out of the parser (kcache warm died with "terminate called after throwing ...").
TEST_F(ManifestTest, NodesOfAnUnexpectedShapeAreErrorsNotExceptions) {
  EXPECT_NE(ErrorOf("{[a]: 1}\n")
                .find("manifest.yaml:1:2: manifest: a field name must be a "
                      "single word"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels:\n  - {name: k, source_text: x, header_texts: {[h]: y}}\n")
                .find("header_texts: a header name must be a single value"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nkernels:\n  - {? {a: b} : c}\n").find("a field name must be"),
            std::string::npos);
}

TEST_F(ManifestTest, MissingManifestIsNotFound) {
  absl::StatusOr<Manifest> m = LoadManifest(dir_ / "absent.yaml");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("absent.yaml"), absl::string_view::npos);
}

TEST(BundledManifestTest, LoadsAndEveryKernelHasAnId) {
  absl::StatusOr<Manifest> m = LoadManifest(testing::SourcePath("kernels/manifest.yaml"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GE(m->kernels.size(), 8u);
  for (const ManifestKernel& k : m->kernels) {
    EXPECT_EQ(k.record.id, ComputeKernelId(k.record.spec)) << k.record.spec.name;
    EXPECT_FALSE(k.record.spec.source.empty()) << k.record.spec.name;
  }
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

TEST(WriteManifestTest, RoundTripsEveryBundledKernelToTheSameIds) {
  absl::StatusOr<Manifest> bundled = LoadManifest(testing::SourcePath("kernels/manifest.yaml"));
  ASSERT_TRUE(bundled.ok()) << bundled.status();
  std::vector<KernelRecord> records;
  for (const ManifestKernel& k : bundled->kernels) records.push_back(k.record);
  std::string yaml = WriteManifest(records, "exported by a test\nsecond line");
  EXPECT_EQ(yaml.rfind("# exported by a test", 0), 0u) << yaml.substr(0, 80);
  absl::StatusOr<Manifest> back = ParseManifest(yaml, "/nonexistent/exported.yaml");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->kernels.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(back->kernels[i].record.id, records[i].id) << records[i].spec.name;
    EXPECT_EQ(back->kernels[i].record.arch.min_arch, records[i].arch.min_arch);
    EXPECT_EQ(back->kernels[i].record.want_ltoir, records[i].want_ltoir);
  }
}

TEST(WriteManifestTest, AwkwardTextSurvivesExactly) {
  std::vector<std::string> texts = {"no trailing newline",
                                    "two trailing newlines\n\n",
                                    "  leading spaces\n",
                                    "\ttab first\n",
                                    "crlf\r\nline\r\n",
                                    "quotes \" and ' and \\ backslash\n",
                                    "# looks like a comment\n",
                                    "ünïcödé\n",
                                    ""};
  std::vector<KernelRecord> records;
  for (size_t i = 0; i < texts.size(); ++i) {
    KernelRecord r;
    r.spec.name = "k" + std::to_string(i);
    r.spec.source = texts[i].empty() ? "// a source is never empty\n" : texts[i];
    r.spec.headers["h.cuh"] = texts[(i + 1) % texts.size()];
    r.id = ComputeKernelId(r.spec);
    records.push_back(r);
  }
  absl::StatusOr<Manifest> back = ParseManifest(WriteManifest(records, ""), "/x/m.yaml");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->kernels.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(back->kernels[i].record.spec.source, records[i].spec.source) << i;
    EXPECT_EQ(back->kernels[i].record.spec.headers, records[i].spec.headers) << i;
    EXPECT_EQ(back->kernels[i].record.id, records[i].id) << i;
  }
}

// Found by tests/fuzz/manifest_fuzzer: sources travel as bytes (KernelSpec.source), but
// yaml-cpp writes a byte that is not UTF-8 as U+FFFD, so an exported manifest warmed a kernel
// with another id. Such text is written as !!binary base64 now.
TEST(WriteManifestTest, TextThatIsNotUtf8SurvivesExactly) {
  std::vector<std::string> texts = {
      "// latin-1 comment: gr\xf6\xdf"
      "e\n",
      "\xff",
      "cut short \xc3",
      "overlong \xc0\xaf\n",
      "surrogate \xed\xa0\x80\n",
      "past U+10FFFF \xf4\x90\x80\x80\n",
      "valid \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"};
  std::vector<KernelRecord> records;
  for (size_t i = 0; i < texts.size(); ++i) {
    KernelRecord r;
    r.spec.name = "k" + std::to_string(i);
    r.spec.source = texts[i];
    r.spec.headers["h.cuh"] = texts[(i + 1) % texts.size()];
    r.id = ComputeKernelId(r.spec);
    records.push_back(r);
  }
  std::string yaml = WriteManifest(records, "");
  EXPECT_NE(yaml.find("!!binary"), std::string::npos) << yaml;
  absl::StatusOr<Manifest> back = ParseManifest(yaml, "/x/m.yaml");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
  ASSERT_EQ(back->kernels.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(back->kernels[i].record.spec.source, records[i].spec.source) << i;
    EXPECT_EQ(back->kernels[i].record.spec.headers, records[i].spec.headers) << i;
    EXPECT_EQ(back->kernels[i].record.id, records[i].id) << i;
  }
}

TEST(WriteManifestTest, BinaryTextThatIsNotBase64IsRefused) {
  absl::StatusOr<Manifest> m = ParseManifest(
      "version: 1\nkernels:\n  - name: k\n    source_text: !!binary \"not base64!\"\n",
      "/x/m.yaml");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("/x/m.yaml:4:18: kernels[0].source_text: is tagged !!binary "
                                      "but is not base64"),
            absl::string_view::npos)
      << m.status();
}

TEST(WriteManifestTest, ASpecOverTheCoreLimitsIsRefusedOnLoad) {
  // What the daemon would refuse from a worker (core's ValidateSpecLimits) is refused here too:
  // a NUL byte (NVRTC reads C strings), an empty source.
  KernelRecord nul;
  nul.spec.name = "nul";
  nul.spec.source = std::string("nul \0 inside\n", 14);
  absl::StatusOr<Manifest> back = ParseManifest(WriteManifest({nul}, ""), "/x/m.yaml");
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("source: contains a NUL byte at offset 4"),
            absl::string_view::npos)
      << back.status();
}

TEST(ManifestFromRecordsTest, KeepsRecordsInOrder) {
  KernelRecord a;
  a.spec.name = "a";
  KernelRecord b;
  b.spec.name = "b";
  Manifest m = ManifestFromRecords({a, b});
  ASSERT_EQ(m.kernels.size(), 2u);
  EXPECT_EQ(m.kernels[1].record.spec.name, "b");
  EXPECT_NE(m.Find("a"), nullptr);
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

TEST(WriteManifestTest, WorkerChosenNamesBecomeValidUniqueNames) {
  KernelRecord a;
  a.spec.name = "MyKernel<float>";
  a.spec.source = "a\n";
  KernelRecord b = a;
  b.spec.source = "b\n";
  KernelRecord c;
  c.spec.name = "";
  c.spec.source = "c\n";
  absl::StatusOr<Manifest> back = ParseManifest(WriteManifest({a, b, c}, ""), "/x/m.yaml");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->kernels.size(), 3u);
  EXPECT_EQ(back->kernels[0].record.spec.name, "mykernel_float_");
  EXPECT_EQ(back->kernels[1].record.spec.name, "mykernel_float__2");
  EXPECT_EQ(back->kernels[2].record.spec.name, "kernel");
}

}  // namespace
}  // namespace kcache
