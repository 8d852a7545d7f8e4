// Runs the CPU reference (kernels/reference/reference.h) of a launch-table entry on a Problem
// (launch_plan.h), in place: outputs and in/out tensors end up holding what the kernel should
// produce. The table's `reference` string picks the function ("softmax(DType::kF16, ...)",
// "geglu(..., tanh_approx=true)"); arguments are taken from the problem by parameter name, so a
// renamed parameter is an error here, not a silently wrong call. Header-only.
#ifndef KCACHE_TESTS_GPU_REFERENCE_RUNNER_H_
#define KCACHE_TESTS_GPU_REFERENCE_RUNNER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/reference/launch.h"
#include "kernels/reference/reference.h"
#include "tests/gpu/launch_plan.h"

namespace kcache::gpu_test {

// Typed access to a problem's arguments by name. The first missing name or wrong kind is kept
// in status(); Call() then does nothing, so a call reads as one line per reference.
class ArgReader {
 public:
  explicit ArgReader(Problem& problem) : problem_(problem) {}

  float* F(absl::string_view name) {  // f32 / f16 / bf16 tensor (as floats)
    Tensor* t = TensorNamed(name, "a float tensor", launch::Elem::kF32, launch::Elem::kF16,
                            launch::Elem::kBF16);
    return t == nullptr || t->null ? nullptr : t->f.data();
  }
  int32_t* I32(absl::string_view name) {
    Tensor* t = TensorNamed(name, "an int32 tensor", launch::Elem::kI32);
    return t == nullptr || t->null ? nullptr : t->i.data();
  }
  uint8_t* Fp8(absl::string_view name) {
    Tensor* t = TensorNamed(name, "an fp8 tensor", launch::Elem::kFp8E4M3);
    return t == nullptr || t->null ? nullptr : t->q.data();
  }
  int Int(absl::string_view name) {
    const int k = Scalar(name, launch::Arg::kInt32, "an int32 scalar");
    return k < 0 ? 0 : static_cast<int>(problem_.scalars[k]);
  }
  float Float(absl::string_view name) {
    const int k = Scalar(name, launch::Arg::kFloat32, "a float scalar");
    return k < 0 ? 0.f : static_cast<float>(problem_.scalars[k]);
  }

  // Calls `fn(args...)` unless an argument lookup failed.
  template <typename Fn, typename... Args>
  void Call(Fn fn, Args... args) {
    if (status_.ok()) fn(args...);
  }
  const absl::Status& status() const { return status_; }

 private:
  void Fail(absl::string_view name, absl::string_view wanted) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(absl::StrCat(
        problem_.entry->symbol, ": the reference ", problem_.entry->reference, " needs '", name,
        "' as ", wanted, " and the launch table has no such parameter"));
  }
  template <typename... Elems>
  Tensor* TensorNamed(absl::string_view name, absl::string_view wanted, Elems... elems) {
    const int k = problem_.Find(name);
    if (k < 0 || problem_.param(k).arg != launch::Arg::kPointer ||
        !((problem_.param(k).elem == elems) || ...)) {
      Fail(name, wanted);
      return nullptr;
    }
    return &problem_.tensors[k];
  }
  int Scalar(absl::string_view name, launch::Arg arg, absl::string_view wanted) {
    const int k = problem_.Find(name);
    if (k < 0 || problem_.param(k).arg != arg) {
      Fail(name, wanted);
      return -1;
    }
    return k;
  }

  Problem& problem_;
  absl::Status status_;
};

// The DType written in a reference string ("rms_norm(DType::kBF16, ...)").
inline absl::StatusOr<reference::DType> ReferenceDType(absl::string_view call) {
  if (absl::StrContains(call, "DType::kF32")) return reference::DType::kF32;
  if (absl::StrContains(call, "DType::kF16")) return reference::DType::kF16;
  if (absl::StrContains(call, "DType::kBF16")) return reference::DType::kBF16;
  return absl::InvalidArgumentError(absl::StrCat("'", call, "' names no DType"));
}

// The value of a fixed boolean argument written as "flag=true" / "flag=false".
inline absl::StatusOr<bool> ReferenceFlag(absl::string_view call, absl::string_view flag) {
  if (absl::StrContains(call, absl::StrCat(flag, "=true"))) return true;
  if (absl::StrContains(call, absl::StrCat(flag, "=false"))) return false;
  return absl::InvalidArgumentError(
      absl::StrCat("'", call, "' does not say ", flag, "=true or ", flag, "=false"));
}

// Runs the entry's CPU reference on `problem` in place. NotFound when the reference string is
// not one this file knows (add it below); InvalidArgument when it needs a parameter the table
// lacks.
inline absl::Status RunReference(Problem& problem) {
  namespace ref = ::kcache::reference;
  const absl::string_view call = problem.entry->reference;
  const absl::string_view fn = call.substr(0, call.find('('));
  ArgReader a(problem);
  if (fn == "timestep_embedding" || fn == "rms_norm" || fn == "layer_norm" || fn == "softmax" ||
      fn == "rotary_embedding") {
    absl::StatusOr<ref::DType> type = ReferenceDType(call);
    if (!type.ok()) return type.status();
    if (fn == "timestep_embedding") {
      a.Call(ref::timestep_embedding, *type, a.F("timesteps"), a.F("out"), a.Int("n"), a.Int("dim"),
             a.Float("max_period"), a.Float("downscale_freq_shift"), a.Float("scale"),
             a.Int("flip_sin_to_cos"));
    } else if (fn == "rms_norm") {
      a.Call(ref::rms_norm, *type, a.F("x"), a.F("w"), a.F("y"), a.Int("rows"), a.Int("cols"),
             a.Float("eps"));
    } else if (fn == "layer_norm") {
      a.Call(ref::layer_norm, *type, a.F("x"), a.F("gamma"), a.F("beta"), a.F("y"), a.Int("rows"),
             a.Int("cols"), a.Float("eps"));
    } else if (fn == "softmax") {
      a.Call(ref::softmax, *type, a.F("x"), a.F("y"), a.Int("rows"), a.Int("cols"),
             a.Float("scale"));
    } else {
      a.Call(ref::rotary_embedding, *type, a.I32("positions"), a.F("q"), a.F("k"), a.Int("tokens"),
             a.Int("heads_q"), a.Int("heads_k"), a.Int("head_dim"), a.Int("rot_dim"),
             a.Float("base"));
    }
  } else if (fn == "geglu" || fn == "attention") {
    absl::StatusOr<bool> flag = ReferenceFlag(call, fn == "geglu" ? "tanh_approx" : "accum_half");
    if (!flag.ok()) return flag.status();
    if (fn == "geglu") {
      a.Call(ref::geglu, a.F("in"), a.F("out"), a.Int("rows"), a.Int("d"), *flag);
    } else {
      a.Call(ref::attention, a.F("q"), a.F("k"), a.F("v"), a.F("o"), a.Int("batch_heads"),
             a.Int("lq"), a.Int("lk"), a.Float("scale"), a.Int("causal"), *flag);
    }
  } else if (fn == "group_norm") {
    a.Call(ref::group_norm, a.F("x"), a.F("gamma"), a.F("beta"), a.F("y"), a.Int("N"), a.Int("C"),
           a.Int("HW"), a.Int("G"), a.Float("eps"), a.Int("apply_silu"));
  } else if (fn == "linear_bf16") {
    a.Call(ref::linear_bf16, a.F("x"), a.F("w"), a.F("bias"), a.F("y"), a.Int("M"), a.Int("N"),
           a.Int("K"));
  } else if (fn == "fp8_amax") {
    a.Call(ref::fp8_amax, a.F("x"), a.F("amax"), a.Int("n"));
  } else if (fn == "fp8_quantize_e4m3") {
    a.Call(ref::fp8_quantize_e4m3, a.F("x"), a.Fp8("q"), a.F("scale"), a.Int("n"));
  } else if (fn == "fp8_dequantize_e4m3") {
    a.Call(ref::fp8_dequantize_e4m3, a.Fp8("q"), a.F("y"), a.F("scale"), a.Int("n"));
  } else if (fn == "fp8_gemv_e4m3") {
    a.Call(ref::fp8_gemv_e4m3, a.Fp8("w"), a.F("x"), a.F("y"), a.F("w_scale"), a.Int("N"),
           a.Int("K"));
  } else if (fn == "moe_topk_softmax") {
    a.Call(ref::moe_topk_softmax, a.F("logits"), a.F("topk_weights"), a.I32("topk_ids"),
           a.Int("tokens"), a.Int("num_experts"), a.Int("k"), a.Int("renormalize"));
  } else if (fn == "moe_align") {
    a.Call(ref::moe_align, a.I32("topk_ids"), a.Int("numel"), a.Int("num_experts"), a.Int("align"),
           a.Int("capacity"), a.I32("expert_offsets"), a.I32("sorted_ids"),
           a.I32("block_expert_ids"));
  } else if (fn == "top_k_top_p_sample") {
    a.Call(ref::top_k_top_p_sample, a.F("logits"), a.F("uniform"), a.I32("sampled"), a.Int("rows"),
           a.Int("n"), a.Float("temperature"), a.Int("top_k"), a.Float("top_p"));
  } else {
    return absl::NotFoundError(absl::StrCat("no CPU reference call for '", call, "' (",
                                            problem.entry->symbol,
                                            "); add it to tests/gpu/reference_runner.h"));
  }
  return a.status();
}

}  // namespace kcache::gpu_test

#endif  // KCACHE_TESTS_GPU_REFERENCE_RUNNER_H_
