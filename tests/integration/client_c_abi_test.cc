// The C ABI (kcache/kcache_c.h) as a C or ctypes caller uses it, against a real kcached:
// connect, resolve by source, name and id, read the kernel, free it, read error messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kcache/kcache.h"
#include "kcache/kcache_c.h"
#include "tests/testutil/daemon_process.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

class CAbiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(daemon_.Start().ok()) << daemon_.Log();
    address_ = daemon_.address();
    kcache_options options;
    kcache_options_init(&options);
    options.address = address_.c_str();
    options.deadline_ms = 30000;
    options.local_compile_fallback = 0;
    ASSERT_EQ(kcache_connect(&options, &client_), KCACHE_OK) << kcache_last_error();
  }
  void TearDown() override { kcache_client_free(client_); }

  ::kcache::testing::DaemonProcess daemon_;
  std::string address_;
  kcache_client* client_ = nullptr;
};

TEST_F(CAbiTest, ResolveBySourceThenByNameAndIdRoundTrip) {
  const char* header_names[] = {"scale.cuh"};
  const char* header_contents[] = {::kcache::testing::kScaleHeader};
  const char* expressions[] = {"scale<float>"};
  kcache_source source = {};
  source.name = "scale";
  source.source = ::kcache::testing::kScaleTemplateSource;
  source.header_names = header_names;
  source.header_contents = header_contents;
  source.num_headers = 1;
  source.name_expressions = expressions;
  source.num_name_expressions = 1;
  kcache_device device = {8, 9, 13000};

  kcache_kernel* kernel = nullptr;
  ASSERT_EQ(kcache_resolve(client_, &source, &device, &kernel), KCACHE_OK)
      << kcache_last_error() << "\n"
      << daemon_.Log();
  size_t size = 0;
  const char* data = static_cast<const char*>(kcache_kernel_data(kernel, &size));
  ASSERT_GT(size, 4u);
  EXPECT_EQ(std::string(data, 4),
            "\x7f"
            "ELF");
  EXPECT_STREQ(kcache_kernel_kind(kernel), "cubin");
  EXPECT_STREQ(kcache_kernel_target(kernel), "sm_89");
  EXPECT_STREQ(kcache_kernel_rule(kernel), "compiled");
  EXPECT_STREQ(kcache_kernel_served_from(kernel), "daemon:compile");
  EXPECT_EQ(kcache_kernel_from_daemon(kernel), 1);
  EXPECT_EQ(kcache_kernel_needs_jit(kernel), 0);
  EXPECT_EQ(std::string(kcache_kernel_id(kernel)).size(), 64u);
  const char* lowered = kcache_kernel_lowered_name(kernel, "scale<float>");
  ASSERT_NE(lowered, nullptr);
  EXPECT_EQ(std::string(lowered).rfind("_Z", 0), 0u) << lowered;
  EXPECT_EQ(kcache_kernel_lowered_name(kernel, "scale<double>"), nullptr);
  std::string id = kcache_kernel_id(kernel);
  std::string bytes(data, size);
  kcache_kernel_free(kernel);

  kcache_kernel* by_id = nullptr;
  ASSERT_EQ(kcache_resolve_by_id(client_, id.c_str(), &device, &by_id), KCACHE_OK)
      << kcache_last_error();
  size_t by_id_size = 0;
  const void* by_id_data = kcache_kernel_data(by_id, &by_id_size);
  EXPECT_EQ(std::string(static_cast<const char*>(by_id_data), by_id_size), bytes);
  EXPECT_STREQ(kcache_kernel_rule(by_id), "exact_sass");
  kcache_kernel_free(by_id);

  char* json = nullptr;
  ASSERT_EQ(kcache_stat_json(client_, &json), KCACHE_OK) << kcache_last_error();
  nlohmann::json stats = nlohmann::json::parse(json);
  EXPECT_TRUE(stats.contains("counters")) << json;
  kcache_string_free(json);
}

struct Collected {
  std::vector<std::pair<size_t, int>> results;  // index, status
  std::vector<std::string> messages;
  std::vector<kcache_kernel*> kernels;
};

TEST_F(CAbiTest, ResolveManyCallsBackOncePerKernel) {
  kcache_source saxpy = {};
  saxpy.name = "saxpy";
  saxpy.source = ::kcache::testing::kSaxpySource;
  kcache_device device = {8, 9, 13000};
  kcache_kernel_ref refs[3] = {};
  refs[0].source = &saxpy;
  refs[1].name = "no_such_kernel";
  refs[2].id = "0123";  // not an id
  Collected got;
  auto callback = [](void* context, size_t index, int status, const char* message,
                     kcache_kernel* kernel) {
    auto* c = static_cast<Collected*>(context);
    c->results.emplace_back(index, status);
    c->messages.emplace_back(message);
    c->kernels.push_back(kernel);
  };
  ASSERT_EQ(kcache_resolve_many(client_, refs, 3, &device, callback, &got), KCACHE_OK)
      << kcache_last_error();
  ASSERT_EQ(got.results.size(), 3u);
  for (size_t k = 0; k < got.results.size(); ++k) {
    auto [index, status] = got.results[k];
    if (index == 0) {
      ASSERT_EQ(status, KCACHE_OK) << got.messages[k] << daemon_.Log();
      size_t size = 0;
      const char* data = static_cast<const char*>(kcache_kernel_data(got.kernels[k], &size));
      EXPECT_EQ(std::string(data, 4),
                "\x7f"
                "ELF");
      EXPECT_EQ(std::string(kcache_kernel_toolkit(got.kernels[k])).rfind("nvrtc-", 0), 0u);
      EXPECT_EQ(kcache_kernel_lowered_count(got.kernels[k]), 0u);
      kcache_kernel_free(got.kernels[k]);
    } else {
      EXPECT_EQ(status, index == 1 ? KCACHE_NOT_FOUND : KCACHE_INVALID_ARGUMENT) << index;
      EXPECT_EQ(got.kernels[k], nullptr) << index;
      EXPECT_FALSE(got.messages[k].empty()) << index;
    }
  }
  // A ref with two fields set is refused before anything is asked.
  refs[1].id = "abc";
  Collected none;
  EXPECT_EQ(kcache_resolve_many(client_, refs, 3, &device, callback, &none),
            KCACHE_INVALID_ARGUMENT);
  EXPECT_TRUE(none.results.empty());
  EXPECT_NE(std::string(kcache_last_error()).find("kernels[1]"), std::string::npos);
}

uint64_t FastHits(kcache_client* client) {
  char* json = nullptr;
  if (kcache_stat_json(client, &json) != KCACHE_OK) return ~0ull;
  nlohmann::json stats = nlohmann::json::parse(json);
  kcache_string_free(json);
  return stats["counters"].value("fast.hits", uint64_t{0});
}

TEST_F(CAbiTest, FastPathOptionChoosesHowStoredBytesArrive) {
  kcache_options options;
  kcache_options_init(&options);
  EXPECT_EQ(options.fast_path, 1);
  for (int32_t reserved : options.reserved) EXPECT_EQ(reserved, 0);
  options.address = address_.c_str();
  options.local_compile_fallback = 0;
  options.fast_path = 0;
  kcache_client* grpc_only = nullptr;
  ASSERT_EQ(kcache_connect(&options, &grpc_only), KCACHE_OK) << kcache_last_error();

  kcache_source saxpy = {};
  saxpy.name = "saxpy";
  saxpy.source = ::kcache::testing::kSaxpySource;
  kcache_device device = {8, 9, 13000};
  kcache_kernel* compiled = nullptr;  // a miss: compiled over gRPC, then stored
  ASSERT_EQ(kcache_resolve(client_, &saxpy, &device, &compiled), KCACHE_OK)
      << kcache_last_error() << daemon_.Log();
  std::string id = kcache_kernel_id(compiled);
  size_t size = 0;
  const void* data = kcache_kernel_data(compiled, &size);
  std::string bytes(static_cast<const char*>(data), size);
  kcache_kernel_free(compiled);
  ASSERT_EQ(FastHits(client_), 0u);

  kcache_kernel* over_grpc = nullptr;
  ASSERT_EQ(kcache_resolve_by_id(grpc_only, id.c_str(), &device, &over_grpc), KCACHE_OK)
      << kcache_last_error();
  EXPECT_EQ(FastHits(client_), 0u) << "fast_path = 0 took the fast path";
  kcache_kernel* over_fast = nullptr;
  ASSERT_EQ(kcache_resolve_by_id(client_, id.c_str(), &device, &over_fast), KCACHE_OK)
      << kcache_last_error();
  EXPECT_EQ(FastHits(client_), 1u) << "the default did not take the fast path";
  for (kcache_kernel* k : {over_grpc, over_fast}) {
    data = kcache_kernel_data(k, &size);
    EXPECT_EQ(std::string(static_cast<const char*>(data), size), bytes);
    kcache_kernel_free(k);
  }
  kcache_client_free(grpc_only);
}

TEST_F(CAbiTest, ErrorsComeBackAsCodesWithMessages) {
  kcache_device device = {8, 9, 0};
  kcache_kernel* kernel = reinterpret_cast<kcache_kernel*>(0x1);
  EXPECT_EQ(kcache_resolve_by_name(client_, "no_such_kernel", &device, &kernel), KCACHE_NOT_FOUND);
  EXPECT_EQ(kernel, nullptr);
  EXPECT_NE(std::string(kcache_last_error()).find("no_such_kernel"), std::string::npos)
      << kcache_last_error();

  EXPECT_EQ(kcache_resolve_by_id(client_, "nothex", &device, &kernel), KCACHE_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kcache_last_error()).find("not a kernel id"), std::string::npos);
  EXPECT_EQ(kcache_resolve_by_name(nullptr, "x", &device, &kernel), KCACHE_INVALID_ARGUMENT);

  kcache_options bad;
  kcache_options_init(&bad);
  bad.deadline_ms = 0;
  kcache_client* none = nullptr;
  EXPECT_EQ(kcache_connect(&bad, &none), KCACHE_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(kcache_last_error()).find("deadline"), std::string::npos);
}

TEST(CAbiNoDaemonTest, UnreachableDaemonWithoutFallbackIsUnavailable) {
  ::kcache::testing::TempDir dir;
  std::string address = "unix://" + (dir / "absent.sock");
  kcache_options options;
  kcache_options_init(&options);
  EXPECT_EQ(options.deadline_ms, 2000);
  EXPECT_EQ(options.local_compile_fallback, 1);
  EXPECT_EQ(options.wait_limit_ms, 0);
  EXPECT_EQ(options.startup_grace_ms, 5000);
  options.address = address.c_str();
  options.local_compile_fallback = 0;
  options.startup_grace_ms = 0;  // else it first waits for kcached to appear
  kcache_client* client = nullptr;
  ASSERT_EQ(kcache_connect(&options, &client), KCACHE_OK);
  kcache_source source = {};
  source.name = "saxpy";
  source.source = ::kcache::testing::kSaxpySource;
  kcache_device device = {8, 9, 0};
  kcache_kernel* kernel = nullptr;
  EXPECT_EQ(kcache_resolve(client, &source, &device, &kernel), KCACHE_UNAVAILABLE);
  EXPECT_NE(std::string(kcache_last_error()).find(address), std::string::npos);
  kcache_client_free(client);
}

TEST(CAbiNoDaemonTest, DetectDevicesWithoutADriverIsNotFound) {
  kcache_device devices[4];
  int count = -1;
  int rc = kcache_detect_devices(devices, 4, &count);
  if (rc == KCACHE_OK) GTEST_SKIP() << count << " GPUs here";
  EXPECT_EQ(rc, KCACHE_NOT_FOUND);
  EXPECT_EQ(count, 0);
  EXPECT_NE(std::string(kcache_last_error()).find("no CUDA driver"), std::string::npos);
}

// The manifest reader hands out what LoadManifestKernels (the reader of `kcache warm`) reads:
// the same kernels, variants included, with the same options, headers and arch range.
TEST(CAbiManifestTest, LoadsWhatWarmReads) {
  std::string path = testing::SourcePath("kernels/manifest.yaml");
  absl::StatusOr<std::vector<client::KernelSource>> expected = client::LoadManifestKernels(path);
  ASSERT_TRUE(expected.ok()) << expected.status();
  kcache_manifest* manifest = nullptr;
  ASSERT_EQ(kcache_manifest_load(path.c_str(), &manifest), KCACHE_OK) << kcache_last_error();
  ASSERT_EQ(kcache_manifest_count(manifest), expected->size());
  for (size_t i = 0; i < expected->size(); ++i) {
    const client::KernelSource& want = (*expected)[i];
    const kcache_source* got = kcache_manifest_kernel(manifest, i);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->name, want.name);
    EXPECT_EQ(got->source, want.source);
    ASSERT_EQ(got->num_headers, want.headers.size()) << want.name;
    for (size_t h = 0; h < got->num_headers; ++h) {
      EXPECT_EQ(want.headers.at(got->header_names[h]), got->header_contents[h]);
    }
    ASSERT_EQ(got->num_options, want.options.size()) << want.name;
    for (size_t o = 0; o < got->num_options; ++o) EXPECT_EQ(got->options[o], want.options[o]);
    ASSERT_EQ(got->num_name_expressions, want.name_expressions.size());
    for (size_t n = 0; n < got->num_name_expressions; ++n) {
      EXPECT_EQ(got->name_expressions[n], want.name_expressions[n]);
    }
    EXPECT_EQ(got->min_arch, want.min_arch);
    EXPECT_EQ(got->max_arch, want.max_arch);
  }
  EXPECT_EQ(kcache_manifest_kernel(manifest, expected->size()), nullptr);
  kcache_manifest_free(manifest);

  kcache_manifest* none = nullptr;
  EXPECT_EQ(kcache_manifest_load("/nonexistent/manifest.yaml", &none), KCACHE_NOT_FOUND);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(kcache_last_error()).find("/nonexistent/manifest.yaml"), std::string::npos);
}

}  // namespace
}  // namespace kcache
