// Turning one row of the launch table (kernels/reference/launch.h) into a concrete problem: the
// scalar arguments (the table's example values), every pointer argument sized by its Expr and
// filled deterministically as its Init says, the grid / block / shared memory of the launch, and
// the kernelParams array cuLaunchKernel takes. No CUDA here: the GPU suite
// (tests/gpu/kernels_gpu_test.cc) and the no-GPU logic test
// (tests/unit/gpu_launcher_logic_test.cc) share it. Each pointer argument is a Tensor
// (host_tensor.h). Header-only.
#ifndef KCACHE_TESTS_GPU_LAUNCH_PLAN_H_
#define KCACHE_TESTS_GPU_LAUNCH_PLAN_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/reference/launch.h"
#include "kernels/reference/reference.h"
#include "tests/gpu/host_tensor.h"

namespace kcache::gpu_test {

namespace launch = ::kcache::reference::launch;

// Output buffers (Fill::kNone) start as this byte on the GPU and in the reference's copy alike,
// so elements a kernel leaves untouched (moe_align past `total`) compare equal.
inline constexpr uint8_t kSentinelByte = 0xA5;

// Everything one launch of one entry point takes.
struct Problem {
  const launch::EntryPoint* entry = nullptr;
  std::vector<Tensor> tensors;  // one per parameter; elem kNone for scalars
  std::vector<double> scalars;  // one per parameter; the value of a scalar, 0 for pointers

  const launch::Param& param(size_t k) const { return entry->params[k]; }
  // Index of the parameter called `name`, or -1.
  int Find(absl::string_view name) const {
    for (size_t k = 0; k < entry->num_params; ++k) {
      if (name == entry->params[k].name) return static_cast<int>(k);
    }
    return -1;
  }
};

// Value of the int32 scalar argument `name` (Expr factors and hi_arg name these).
inline absl::StatusOr<int64_t> IntArg(const Problem& problem, absl::string_view name) {
  const int k = problem.Find(name);
  if (k < 0 || problem.param(k).arg != launch::Arg::kInt32) {
    return absl::InvalidArgumentError(
        absl::StrCat(problem.entry->symbol, ": '", name, "' is not an int32 scalar argument"));
  }
  return static_cast<int64_t>(problem.scalars[k]);
}

// Evaluates a launch-table Expr over the problem's int32 scalars.
inline absl::StatusOr<int64_t> EvalExpr(const Problem& problem, const launch::Expr& expr) {
  absl::Status error;
  const int64_t value = launch::Eval(expr, [&](const char* name) -> int64_t {
    absl::StatusOr<int64_t> v = IntArg(problem, name);
    if (!v.ok() && error.ok()) error = v.status();
    return v.ok() ? *v : 0;
  });
  if (!error.ok()) return error;
  return value;
}

// Deterministic random numbers (SplitMix64), the same on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

inline uint64_t Fnv1a(absl::string_view text, uint64_t hash = 0xcbf29ce484222325ull) {
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

struct ProblemOptions {
  uint64_t seed = 1;           // the same seed gives the same bytes
  bool null_optional = false;  // pass null for every nullable pointer (bias, k)
};

// Fills `tensor` (already sized) as `init` says.
inline absl::Status FillTensor(const Problem& problem, const launch::Param& param, SplitMix64& rng,
                               Tensor& tensor) {
  const launch::Init& init = param.init;
  const size_t n = tensor.size();
  switch (init.fill) {
    case launch::Fill::kNone:
      tensor = Tensor::Filled(param.elem, n, kSentinelByte);
      return absl::OkStatus();
    case launch::Fill::kZero:
    case launch::Fill::kConst:
      for (size_t k = 0; k < n; ++k) tensor.Set(k, init.fill == launch::Fill::kZero ? 0 : init.lo);
      return absl::OkStatus();
    case launch::Fill::kUniform:
    case launch::Fill::kFp8Uniform:
      if (init.fill == launch::Fill::kFp8Uniform && param.elem != launch::Elem::kFp8E4M3) {
        return absl::InvalidArgumentError(
            absl::StrCat(param.name, ": kFp8Uniform needs an fp8 element type"));
      }
      for (size_t k = 0; k < n; ++k) tensor.Set(k, init.lo + (init.hi - init.lo) * rng.Uniform());
      return absl::OkStatus();
    case launch::Fill::kIntUniform: {
      double hi = init.hi;
      if (init.hi_arg != nullptr) {
        absl::StatusOr<int64_t> v = IntArg(problem, init.hi_arg);
        if (!v.ok()) return v.status();
        hi = static_cast<double>(*v);
      }
      const double lo = std::ceil(init.lo);
      if (!(std::floor(hi) > lo)) {
        return absl::InvalidArgumentError(
            absl::StrCat(param.name, ": empty integer range [", init.lo, ", ", hi, ")"));
      }
      const double span = std::ceil(hi) - lo;
      for (size_t k = 0; k < n; ++k) {
        tensor.Set(k, std::min(lo + std::floor(span * rng.Uniform()), std::ceil(hi) - 1));
      }
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(param.name, ": unknown fill"));
}

// The default problem of `entry`: scalars at their example values, every pointer sized by its
// length Expr and filled by its Init (outputs with kSentinelByte).
inline absl::StatusOr<Problem> MakeProblem(const launch::EntryPoint& entry,
                                           const ProblemOptions& options = {}) {
  Problem problem;
  problem.entry = &entry;
  problem.tensors.resize(entry.num_params);
  problem.scalars.assign(entry.num_params, 0.0);
  for (size_t k = 0; k < entry.num_params; ++k) {
    if (entry.params[k].arg != launch::Arg::kPointer) problem.scalars[k] = entry.params[k].example;
  }
  const uint64_t base =
      Fnv1a(absl::StrCat(entry.kernel, "/", entry.symbol)) ^ (options.seed * 0x9e3779b97f4a7c15ull);
  for (size_t k = 0; k < entry.num_params; ++k) {
    const launch::Param& param = entry.params[k];
    if (param.arg != launch::Arg::kPointer) continue;
    Tensor& tensor = problem.tensors[k];
    tensor.elem = param.elem;
    if (ElemBytes(param.elem) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry.symbol, ": pointer '", param.name, "' has no element type"));
    }
    if (param.nullable && options.null_optional) {
      tensor.null = true;
      continue;
    }
    absl::StatusOr<int64_t> length = EvalExpr(problem, param.length);
    if (!length.ok()) return length.status();
    if (*length < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry.symbol, ": '", param.name, "' has length ", *length));
    }
    tensor = Tensor::Filled(param.elem, static_cast<size_t>(*length), 0);
    SplitMix64 rng(Fnv1a(param.name, base));
    if (absl::Status s = FillTensor(problem, param, rng, tensor); !s.ok()) return s;
  }
  return problem;
}

// The launch configuration of a problem.
struct LaunchDims {
  unsigned int grid[3] = {1, 1, 1};
  unsigned int block[3] = {1, 1, 1};
  unsigned int shared_bytes = 0;
};

inline absl::StatusOr<LaunchDims> PlanLaunch(const Problem& problem) {
  const launch::EntryPoint& entry = *problem.entry;
  LaunchDims dims;
  const int64_t grid_limit[3] = {2147483647, 65535, 65535};
  for (int d = 0; d < 3; ++d) {
    absl::StatusOr<int64_t> g = EvalExpr(problem, entry.grid[d]);
    if (!g.ok()) return g.status();
    if (*g < 1 || *g > grid_limit[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry.symbol, ": grid dimension ", d, " is ", *g));
    }
    dims.grid[d] = static_cast<unsigned int>(*g);
    if (entry.block[d] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry.symbol, ": block dimension ", d, " is ", entry.block[d]));
    }
    dims.block[d] = static_cast<unsigned int>(entry.block[d]);
  }
  if (dims.block[0] * dims.block[1] * dims.block[2] > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(entry.symbol, ": more than 1024 threads"));
  }
  if (entry.dynamic_smem < 0) return absl::InvalidArgumentError("negative shared memory");
  dims.shared_bytes = static_cast<unsigned int>(entry.dynamic_smem);
  return dims;
}

// cuLaunchKernel's kernelParams: one pointer per parameter, each to an 8-byte slot holding the
// argument (a device pointer, an int32 or a float). Movable, not copyable (the pointers point
// into `slots`).
struct KernelArgs {
  struct alignas(8) Slot {
    unsigned char bytes[8] = {};
  };
  std::vector<Slot> slots;
  std::vector<void*> params;

  KernelArgs() = default;
  KernelArgs(KernelArgs&&) = default;
  KernelArgs& operator=(KernelArgs&&) = default;
  KernelArgs(const KernelArgs&) = delete;
  KernelArgs& operator=(const KernelArgs&) = delete;
};

// `device_pointers[k]` is the address of pointer parameter k (ignored for scalars; a null
// tensor is passed as 0 whatever it says).
inline KernelArgs BuildKernelArgs(const Problem& problem,
                                  const std::vector<uint64_t>& device_pointers) {
  KernelArgs args;
  const size_t n = problem.entry->num_params;
  args.slots.resize(n);
  for (size_t k = 0; k < n; ++k) {
    unsigned char* slot = args.slots[k].bytes;
    switch (problem.param(k).arg) {
      case launch::Arg::kPointer: {
        const uint64_t address = problem.tensors[k].null ? 0 : device_pointers.at(k);
        std::memcpy(slot, &address, sizeof(address));
        break;
      }
      case launch::Arg::kInt32: {
        const int32_t v = static_cast<int32_t>(problem.scalars[k]);
        std::memcpy(slot, &v, sizeof(v));
        break;
      }
      case launch::Arg::kFloat32: {
        const float v = static_cast<float>(problem.scalars[k]);
        std::memcpy(slot, &v, sizeof(v));
        break;
      }
    }
    args.params.push_back(slot);
  }
  return args;
}

// A GoogleTest-safe name for an entry point: "softmax_softmax_half",
// "moe_routing_top_k_top_p_sample_float_256_16", "attention_fp16_accum_attention_f16_d64".
inline std::string TestNameFor(const launch::EntryPoint& entry) {
  std::string name;
  for (const char c : absl::StrCat(entry.kernel, "_", entry.symbol)) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (keep) {
      name.push_back(c);
    } else if (!name.empty() && name.back() != '_') {
      name.push_back('_');
    }
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

}  // namespace kcache::gpu_test

#endif  // KCACHE_TESTS_GPU_LAUNCH_PLAN_H_
