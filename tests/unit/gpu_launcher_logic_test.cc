// The half of the GPU suite (tests/gpu/) that needs no GPU, run everywhere: launch-table
// evaluation, input filling, kernel argument packing, the CPU reference dispatch, the output
// comparator (it must catch a wrong output), the driver probe's "no GPU" answers, and warming
// through a real kcached with an exact cubin for a pretend device's SM.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/manifest.h"
#include "engine/compile/toolkit.h"
#include "kernels/reference/launch.h"
#include "kernels/reference/reference.h"
#include "tests/gpu/compare_outputs.h"
#include "tests/gpu/cuda_launch_api.h"
#include "tests/gpu/launch_plan.h"
#include "tests/gpu/reference_runner.h"
#include "tests/gpu/served_kernels.h"

namespace kcache::gpu_test {
namespace {

const launch::EntryPoint& EntryNamed(absl::string_view kernel, absl::string_view symbol) {
  for (const launch::EntryPoint& e : launch::kEntryPoints) {
    if (kernel == e.kernel && symbol == e.symbol) return e;
  }
  ADD_FAILURE() << "no entry " << kernel << " " << symbol;
  return launch::kEntryPoints[0];
}

Problem MustMake(const launch::EntryPoint& entry, ProblemOptions options = {}) {
  absl::StatusOr<Problem> p = MakeProblem(entry, options);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : Problem{};
}

// ---- launch table evaluation --------------------------------------------------------------

TEST(LaunchPlan, EveryEntryPointGetsScalarsAndBuffersAsTheTableSays) {
  for (const launch::EntryPoint& entry : launch::kEntryPoints) {
    SCOPED_TRACE(entry.symbol);
    Problem p = MustMake(entry);
    ASSERT_EQ(p.tensors.size(), entry.num_params);
    auto example = [&](const char* name) -> int64_t {
      for (size_t k = 0; k < entry.num_params; ++k) {
        if (std::strcmp(entry.params[k].name, name) == 0) return entry.params[k].example;
      }
      ADD_FAILURE() << "unknown argument " << name;
      return 0;
    };
    for (size_t k = 0; k < entry.num_params; ++k) {
      const launch::Param& param = entry.params[k];
      if (param.arg != launch::Arg::kPointer) {
        EXPECT_EQ(p.scalars[k], param.example) << param.name;
        EXPECT_EQ(p.tensors[k].size(), 0u);
        continue;
      }
      EXPECT_EQ(p.tensors[k].elem, param.elem);
      EXPECT_FALSE(p.tensors[k].null);
      EXPECT_EQ(p.tensors[k].size(), static_cast<size_t>(launch::Eval(param.length, example)))
          << param.name;
      EXPECT_GE(p.tensors[k].size(), 1u);
    }
  }
}

TEST(LaunchPlan, InputsFollowTheirFillRule) {
  for (const launch::EntryPoint& entry : launch::kEntryPoints) {
    Problem p = MustMake(entry);
    for (size_t k = 0; k < entry.num_params; ++k) {
      const launch::Param& param = entry.params[k];
      if (param.arg != launch::Arg::kPointer) continue;
      SCOPED_TRACE(std::string(entry.symbol) + " " + param.name);
      const Tensor& t = p.tensors[k];
      std::set<double> distinct;
      for (size_t i = 0; i < t.size(); ++i) distinct.insert(t.Value(i));
      Tensor probe = Tensor::Filled(param.elem, 1, 0);
      auto rounded = [&](double v) {
        probe.Set(0, v);
        return probe.Value(0);
      };
      switch (param.init.fill) {
        case launch::Fill::kNone:
          EXPECT_EQ(t.DeviceBytes(),
                    std::vector<uint8_t>(t.size() * ElemBytes(t.elem), kSentinelByte));
          break;
        case launch::Fill::kZero:
          EXPECT_EQ(distinct, std::set<double>{0.0});
          break;
        case launch::Fill::kConst:
          EXPECT_EQ(distinct, std::set<double>{rounded(param.init.lo)});
          break;
        case launch::Fill::kUniform:
        case launch::Fill::kFp8Uniform:
          for (double v : distinct) {
            EXPECT_GE(v, rounded(param.init.lo));
            EXPECT_LE(v, rounded(param.init.hi));
            EXPECT_EQ(rounded(v), v) << "not representable in " << ElemName(t.elem);
          }
          for (uint8_t code : t.q) EXPECT_NE(code & 0x7f, 0x7f) << "fp8 NaN";
          if (t.size() >= 16) {
            EXPECT_GE(distinct.size(), std::min<size_t>(t.size() / 16, 64));
          }
          break;
        case launch::Fill::kIntUniform: {
          double hi = param.init.hi;
          if (param.init.hi_arg != nullptr) hi = p.scalars[p.Find(param.init.hi_arg)];
          for (double v : distinct) {
            EXPECT_EQ(v, std::floor(v));
            EXPECT_GE(v, param.init.lo);
            EXPECT_LT(v, hi);
          }
          if (t.size() >= 100) {
            EXPECT_GE(distinct.size(),
                      std::min<size_t>(static_cast<size_t>(hi - param.init.lo), 50));
          }
          break;
        }
      }
    }
  }
}

TEST(LaunchPlan, TheSameSeedGivesTheSameBytesAndAnotherSeedOthers) {
  const launch::EntryPoint& entry = EntryNamed("softmax", "softmax<__half>");
  Problem a = MustMake(entry), b = MustMake(entry);
  ProblemOptions other;
  other.seed = 2;
  Problem c = MustMake(entry, other);
  EXPECT_EQ(a.tensors[0].DeviceBytes(), b.tensors[0].DeviceBytes());
  EXPECT_NE(a.tensors[0].DeviceBytes(), c.tensors[0].DeviceBytes());
}

TEST(LaunchPlan, GridAndBlockFollowTheExprRules) {
  struct Case {
    const char* kernel;
    const char* symbol;
    unsigned grid[3];
    unsigned block;
  };
  const Case cases[] = {
      {"geglu", "geglu_f16", {3, 1, 1}, 256},                    // ceil(7*640/2048)
      {"attention", "attention_f16_d64", {2, 3, 1}, 128},        // ceil(77/64), bh
      {"linear_bf16_sm80", "linear_bf16_sm80", {3, 2, 1}, 128},  // ceil(136/64), ceil(70/64)
      {"fp8_e4m3", "fp8_amax_f16", {20, 1, 1}, 256},             // ceil(10001/512)
      {"group_norm", "group_norm_f16", {64, 1, 1}, 512},         // N*G
      {"moe_routing", "moe_align<256, 4>", {1, 1, 1}, 256},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.symbol);
    absl::StatusOr<LaunchDims> dims = PlanLaunch(MustMake(EntryNamed(c.kernel, c.symbol)));
    ASSERT_TRUE(dims.ok()) << dims.status();
    for (int d = 0; d < 3; ++d) EXPECT_EQ(dims->grid[d], c.grid[d]) << d;
    EXPECT_EQ(dims->block[0], c.block);
    EXPECT_EQ(dims->block[1] * dims->block[2], 1u);
    EXPECT_EQ(dims->shared_bytes, 0u);
  }
  // The cap applies: fp8_amax's grid stops at 1024 blocks.
  Problem big = MustMake(EntryNamed("fp8_e4m3", "fp8_amax_f16"));
  big.scalars[big.Find("n")] = 10'000'000;
  EXPECT_EQ(PlanLaunch(big)->grid[0], 1024u);
}

TEST(LaunchPlan, AnExprOverAnUnknownOrFloatArgumentIsAnError) {
  Problem p = MustMake(EntryNamed("softmax", "softmax<float>"));
  EXPECT_FALSE(EvalExpr(p, launch::Of("nope")).ok());
  EXPECT_FALSE(EvalExpr(p, launch::Of("scale")).ok());  // a float scalar
  EXPECT_EQ(*EvalExpr(p, launch::Of("rows", "cols")), 6000);
}

TEST(LaunchPlan, KernelArgsHoldPointersAndScalarsInParameterOrder) {
  const launch::EntryPoint& entry = EntryNamed("attention", "attention_f16_d64");
  Problem p = MustMake(entry);
  std::vector<uint64_t> addresses;
  for (size_t k = 0; k < entry.num_params; ++k) addresses.push_back(0x7f0000001000ull + k * 0x100);
  KernelArgs args = BuildKernelArgs(p, addresses);
  ASSERT_EQ(args.params.size(), entry.num_params);
  for (size_t k = 0; k < 4; ++k) {  // q, k, v, o
    uint64_t v;
    std::memcpy(&v, args.params[k], 8);
    EXPECT_EQ(v, addresses[k]);
  }
  int32_t i;
  std::memcpy(&i, args.params[p.Find("lk")], 4);
  EXPECT_EQ(i, 150);
  float f;
  std::memcpy(&f, args.params[p.Find("scale")], 4);
  EXPECT_EQ(f, 0.125f);
  std::memcpy(&i, args.params[p.Find("causal")], 4);
  EXPECT_EQ(i, 1);

  // A null optional pointer is passed as 0 whatever the address list says.
  ProblemOptions null_optional;
  null_optional.null_optional = true;
  Problem linear = MustMake(EntryNamed("linear_bf16_sm80", "linear_bf16_sm80"), null_optional);
  KernelArgs moved = BuildKernelArgs(linear, addresses);
  KernelArgs largs = std::move(moved);
  uint64_t bias = 1;
  std::memcpy(&bias, largs.params[linear.Find("bias")], 8);
  EXPECT_EQ(bias, 0u);
  uint64_t x = 0;
  std::memcpy(&x, largs.params[linear.Find("x")], 8);
  EXPECT_EQ(x, addresses[0]);
}

TEST(LaunchPlan, TestNamesAreUniqueIdentifiers) {
  std::set<std::string> names;
  for (const launch::EntryPoint& entry : launch::kEntryPoints) {
    const std::string name = TestNameFor(entry);
    EXPECT_TRUE(names.insert(name).second) << name;
    ASSERT_FALSE(name.empty());
    for (char c : name)
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_') << name;
  }
  EXPECT_EQ(TestNameFor(EntryNamed("moe_routing", "top_k_top_p_sample<float, 256, 16>")),
            "moe_routing_top_k_top_p_sample_float_256_16");
  EXPECT_EQ(TestNameFor(EntryNamed("attention.fp16_accum", "attention_f16_d64")),
            "attention_fp16_accum_attention_f16_d64");
}

TEST(DeviceBytes, EveryElementTypeRoundTripsInItsDeviceEncoding) {
  Tensor h = Tensor::Filled(launch::Elem::kF16, 2, 0);
  h.Set(0, 1.0);
  h.Set(1, -2.0);
  EXPECT_EQ(h.DeviceBytes(), (std::vector<uint8_t>{0x00, 0x3c, 0x00, 0xc0}));
  Tensor b = Tensor::Filled(launch::Elem::kBF16, 1, 0);
  b.Set(0, 1.0);
  EXPECT_EQ(b.DeviceBytes(), (std::vector<uint8_t>{0x80, 0x3f}));
  Tensor q = Tensor::Filled(launch::Elem::kFp8E4M3, 1, 0);
  q.Set(0, 448.0);
  EXPECT_EQ(q.DeviceBytes(), (std::vector<uint8_t>{0x7e}));
  Tensor i = Tensor::Filled(launch::Elem::kI32, 1, 0);
  i.Set(0, -2.0);
  EXPECT_EQ(i.DeviceBytes(), (std::vector<uint8_t>{0xfe, 0xff, 0xff, 0xff}));
  for (launch::Elem e : {launch::Elem::kF32, launch::Elem::kF16, launch::Elem::kBF16,
                         launch::Elem::kI32, launch::Elem::kFp8E4M3}) {
    Tensor t = Tensor::Filled(e, 37, 0);
    SplitMix64 rng(7);
    for (size_t k = 0; k < t.size(); ++k) t.Set(k, -100 + 200 * rng.Uniform());
    Tensor back = Tensor::FromDeviceBytes(e, t.DeviceBytes());
    EXPECT_EQ(back.DeviceBytes(), t.DeviceBytes()) << ElemName(e);
    for (size_t k = 0; k < t.size(); ++k) EXPECT_EQ(back.Value(k), t.Value(k)) << ElemName(e);
  }
}

// ---- the CPU references and the comparator ------------------------------------------------

// A value of `want`'s element k moved far beyond any tolerance (and still representable).
void Perturb(Tensor& t, size_t k) {
  switch (t.elem) {
    case launch::Elem::kI32:
      t.i[k] += 1;
      break;
    case launch::Elem::kFp8E4M3:
      t.q[k] = (t.q[k] & 0x7f) == 0x7e ? t.q[k] - 1 : t.q[k] + 1;
      break;
    default:
      t.Set(k, t.Value(k) * 1.5 + 1.0);
      break;
  }
}

TEST(Reference, EveryEntryPointRunsAndWritesEveryOutput) {
  for (const launch::EntryPoint& entry : launch::kEntryPoints) {
    for (bool null_optional : {false, true}) {
      SCOPED_TRACE(std::string(entry.symbol) + (null_optional ? " (optional null)" : ""));
      ProblemOptions options;
      options.null_optional = null_optional;
      const Problem input = MustMake(entry, options);
      Problem want = input;
      const absl::Status reference = RunReference(want);
      ASSERT_TRUE(reference.ok()) << reference;
      for (size_t k = 0; k < entry.num_params; ++k) {
        if (entry.params[k].access != launch::Access::kOut) continue;
        EXPECT_NE(want.tensors[k].DeviceBytes(), input.tensors[k].DeviceBytes())
            << entry.params[k].name << " was not written";
      }
      for (const TensorComparison& c : CompareProblem(input, want, want)) {
        EXPECT_TRUE(c.ok()) << c.Describe();
      }
    }
  }
}

TEST(Reference, AnUnknownReferenceOrParameterNameIsAnError) {
  launch::EntryPoint entry = EntryNamed("softmax", "softmax<float>");
  entry.reference = "not_a_kernel(...)";
  Problem p = MustMake(entry);
  EXPECT_TRUE(absl::IsNotFound(RunReference(p)));
  entry.reference = "rms_norm(DType::kF32, ...)";  // needs 'w', which softmax lacks
  p.entry = &entry;
  absl::Status s = RunReference(p);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "no such parameter")) << s;
  entry.reference = "geglu(...)";  // no tanh_approx=
  EXPECT_FALSE(RunReference(p).ok());
}

TEST(Compare, CatchesOneWrongElementInEveryOutputAndInput) {
  for (const launch::EntryPoint& entry : launch::kEntryPoints) {
    const Problem input = MustMake(entry);
    Problem want = input;
    ASSERT_TRUE(RunReference(want).ok());
    for (size_t k = 0; k < entry.num_params; ++k) {
      if (entry.params[k].arg != launch::Arg::kPointer) continue;
      SCOPED_TRACE(std::string(entry.symbol) + " " + entry.params[k].name);
      Problem got = want;
      const size_t index = got.tensors[k].size() / 2;
      Perturb(got.tensors[k], index);
      size_t failing = 0;
      for (const TensorComparison& c : CompareProblem(input, want, got)) {
        if (c.ok()) continue;
        ++failing;
        EXPECT_EQ(c.name, entry.params[k].name);
        EXPECT_EQ(c.mismatches, 1u);
        ASSERT_EQ(c.first.size(), 1u);
        EXPECT_EQ(c.first[0].index, index);
        EXPECT_TRUE(absl::StrContains(c.Describe(), absl::StrCat("[", index, "] got")))
            << c.Describe();
      }
      EXPECT_EQ(failing, 1u);
    }
  }
}

TEST(Compare, AcceptsErrorsWithinTheTableTolerance) {
  const launch::EntryPoint& entry = EntryNamed("norm", "rms_norm<__nv_bfloat16>");
  const Problem input = MustMake(entry);
  Problem want = input;
  ASSERT_TRUE(RunReference(want).ok());
  Problem got = want;
  Tensor& y = got.tensors[input.Find("y")];
  for (size_t k = 0; k < y.size(); ++k) y.Set(k, y.Value(k) + 0.5 * entry.atol);
  for (const TensorComparison& c : CompareProblem(input, want, got)) {
    EXPECT_TRUE(c.ok()) << c.Describe();
  }
}

TEST(Compare, ToleranceFormulaNanAndInfinity) {
  EXPECT_TRUE(Matches(1.0015, 1.0, 1e-3, 1e-3));
  EXPECT_FALSE(Matches(1.0025, 1.0, 1e-3, 1e-3));
  EXPECT_TRUE(Matches(NAN, NAN, 0, 0));
  EXPECT_FALSE(Matches(NAN, 1.0, 1, 1));
  EXPECT_FALSE(Matches(1.0, NAN, 1, 1));
  EXPECT_TRUE(Matches(INFINITY, INFINITY, 0, 0));
  EXPECT_FALSE(Matches(-INFINITY, INFINITY, 1, 1));
  EXPECT_FALSE(Matches(1e30, INFINITY, 1, 1));
  Tensor a = Tensor::Filled(launch::Elem::kF32, 3, 0), b = Tensor::Filled(launch::Elem::kF32, 4, 0);
  EXPECT_FALSE(CompareTensors("y", "output", a, b, 1, 1).ok());
  b = a;
  b.null = true;
  EXPECT_FALSE(CompareTensors("y", "output", a, b, 1, 1).ok());
}

TEST(Compare, ASampledIdMayDifferOnlyOnACumulativeMassBoundary) {
  Problem p = MustMake(EntryNamed("moe_routing", "top_k_top_p_sample<float, 256, 16>"));
  p.scalars[p.Find("rows")] = 2;
  p.scalars[p.Find("n")] = 3;
  p.scalars[p.Find("temperature")] = 1;
  p.scalars[p.Find("top_k")] = 0;
  p.scalars[p.Find("top_p")] = 1;
  // p = 1/6, 2/6, 3/6 for ids 0, 1, 2: ranks are 2, 1, 0; the rank 0/1 boundary is at u = 0.5,
  // so u = 0.50001 draws rank 1 but lies within kSampleBoundaryDelta of rank 0.
  const float row[3] = {0.f, std::log(2.f), std::log(3.f)};
  p.tensors[p.Find("logits")].f = {row[0], row[1], row[2], row[0], row[1], row[2]};
  p.tensors[p.Find("uniform")].f = {0.50001f, 0.25f};
  p.tensors[p.Find("sampled")] = Tensor::Filled(launch::Elem::kI32, 2, kSentinelByte);
  Problem want = p;
  ASSERT_TRUE(RunReference(want).ok());
  const int sampled = p.Find("sampled");
  ASSERT_EQ(want.tensors[sampled].i, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(SampleBoundaryExplains(p, 0, 2));   // the neighbour across the boundary
  EXPECT_FALSE(SampleBoundaryExplains(p, 0, 0));  // two ranks away
  EXPECT_FALSE(SampleBoundaryExplains(p, 1, 1));  // u = 0.25 is nowhere near a boundary

  Problem got = want;
  got.tensors[sampled].i = {2, 1};
  TensorComparison c;
  for (const TensorComparison& each : CompareProblem(p, want, got)) {
    if (each.name == "sampled") c = each;
  }
  ASSERT_EQ(c.name, "sampled");
  EXPECT_EQ(c.tolerated, 1u);
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_EQ(c.first.at(0).index, 1u);
  // Greedy rows never move with the uniform.
  p.scalars[p.Find("temperature")] = 0;
  EXPECT_FALSE(SampleBoundaryExplains(p, 0, 1));
}

// ---- the driver probe without a GPU --------------------------------------------------------

TEST(DriverProbe, NoLibraryOrANonDriverLibraryMeansNoGpu) {
  absl::StatusOr<GpuProbe> missing = ProbeGpu("/nonexistent/libcuda.so.1");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  absl::StatusOr<GpuProbe> not_cuda = ProbeGpu("libm.so.6");
  EXPECT_TRUE(absl::IsNotFound(not_cuda.status())) << not_cuda.status();
  EXPECT_TRUE(absl::StrContains(not_cuda.status().message(), "cuInit")) << not_cuda.status();
}

TEST(DriverProbe, TheToolkitStubHasEverySymbolAndMeansNoGpu) {
  const std::string stub = Toolkit::DefaultRoot() + "/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no stub driver at " << stub;
  absl::StatusOr<std::unique_ptr<LaunchDriver>> driver = OpenLaunchDriver(stub);
  ASSERT_TRUE(driver.ok()) << driver.status();  // every (_v2) symbol name resolves
  absl::StatusOr<GpuProbe> probe = ProbeGpu(stub);
  EXPECT_TRUE(absl::IsNotFound(probe.status())) << probe.status();
  EXPECT_TRUE(absl::StrContains(probe.status().message(), "stub")) << probe.status();
}

// ---- served kernels, for a pretend device --------------------------------------------------

// KCACHE_GPU_DRY_RUN_KERNELS=all (or a comma-separated list of manifest names) runs this for
// those kernels instead (all: about 10 s on 2 cores); KCACHE_GPU_DRY_RUN_DEVICE=9.0 pretends
// another device.
TEST(ServedKernelsDryRun, WarmThroughKcachedServesExactCubinsWithEveryEntrySymbol) {
  absl::StatusOr<Manifest> manifest = LoadManifest(BundledManifestPath());
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const char* pretend = std::getenv("KCACHE_GPU_DRY_RUN_DEVICE");
  absl::StatusOr<client::Device> parsed =
      client::Device::Parse(pretend != nullptr && *pretend != '\0' ? pretend : "8.9");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const client::Device device = *parsed;
  const char* chosen = std::getenv("KCACHE_GPU_DRY_RUN_KERNELS");
  std::vector<std::string> names = {"softmax", "geglu.tanh", "attention"};
  if (chosen != nullptr && std::string(chosen) == "all") {
    names = KernelsForArch(*manifest, device.arch());
  } else if (chosen != nullptr && *chosen != '\0') {
    names = absl::StrSplit(chosen, ',');
  }
  absl::StatusOr<std::unique_ptr<ServedKernels>> served =
      ServedKernels::Start(*manifest, names, device, {});
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ((*served)->kernels().size(), names.size());
  for (const auto& [name, kernel] : (*served)->kernels()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(CheckExactCubin(kernel, device).ok()) << CheckExactCubin(kernel, device);
    client::Device other = device;
    other.sm_minor = device.sm_minor == 0 ? 1 : 0;
    EXPECT_FALSE(CheckExactCubin(kernel, other).ok());  // the checker can fail
    for (const launch::EntryPoint& entry : launch::kEntryPoints) {
      if (name != entry.kernel) continue;
      const std::string symbol =
          entry.name_expression ? kernel.LoweredName(entry.symbol) : entry.symbol;
      ASSERT_FALSE(symbol.empty()) << entry.symbol << " has no lowered name";
      EXPECT_TRUE(absl::StrContains(kernel.data(), symbol)) << symbol << " is not in the cubin";
    }
  }
}

}  // namespace
}  // namespace kcache::gpu_test
