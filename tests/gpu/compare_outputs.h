// Comparing what a kernel wrote with what its CPU reference computed, element by element, with
// the launch table's tolerance: |got - want| <= atol + rtol * |want| for floating-point outputs
// (NaN matches only NaN, infinities only themselves), bit-exact for int32 and fp8 outputs, and
// bit-exact for inputs (a kernel must not write its inputs). The one documented exception: a
// sampled id (top_k_top_p_sample) may differ where the row's uniform lies within float rounding
// of a cumulative-mass boundary (reference.h); such a row is tolerated, and counted, only when
// the reference itself picks the GPU's id once the uniform or top_p moves by
// kSampleBoundaryDelta. Header-only.
#ifndef KCACHE_TESTS_GPU_COMPARE_OUTPUTS_H_
#define KCACHE_TESTS_GPU_COMPARE_OUTPUTS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "kernels/reference/launch.h"
#include "kernels/reference/reference.h"
#include "tests/gpu/launch_plan.h"

namespace kcache::gpu_test {

inline constexpr size_t kListedMismatches = 8;
inline constexpr double kSampleBoundaryDelta = 1e-4;

struct Mismatch {
  size_t index = 0;
  double got = 0;
  double want = 0;
};

// The comparison of one pointer argument.
struct TensorComparison {
  std::string name;  // parameter name
  std::string role;  // "output" or "input"
  launch::Elem elem = launch::Elem::kNone;
  bool exact = false;  // compared bit for bit
  double atol = 0;
  double rtol = 0;
  size_t count = 0;       // elements compared
  size_t mismatches = 0;  // beyond tolerance (tolerated ones excluded)
  size_t tolerated = 0;   // sampler boundary draws accepted
  double max_abs_error = 0;
  size_t worst_index = 0;
  std::vector<Mismatch> first;  // the first kListedMismatches mismatches
  std::string problem;          // a structural problem (sizes differ, null vs non-null)

  bool ok() const { return mismatches == 0 && problem.empty(); }

  // "output 'y' (f16, 6000 elements, |got - want| <= 1e-05 + 0.002 * |want|): 3 mismatches;
  //  max |error| 0.0123 at [17]; first: [17] got 0.5 want 0.48; ..."
  std::string Describe() const {
    std::string text =
        absl::StrCat(role, " '", name, "' (", ElemName(elem), ", ", count, " elements, ");
    if (exact) {
      absl::StrAppend(&text, role == "input" ? "must be left unchanged" : "must match exactly");
    } else {
      absl::StrAppend(&text, absl::StrFormat("|got - want| <= %g + %g * |want|", atol, rtol));
    }
    absl::StrAppend(&text, "): ");
    if (!problem.empty()) return absl::StrCat(text, problem);
    absl::StrAppend(&text, mismatches, mismatches == 1 ? " mismatch" : " mismatches");
    if (tolerated > 0) absl::StrAppend(&text, ", ", tolerated, " boundary draws tolerated");
    if (mismatches == 0) return text;
    absl::StrAppend(
        &text, absl::StrFormat("; max |error| %.9g at [%d]; first:", max_abs_error, worst_index));
    for (const Mismatch& m : first) {
      absl::StrAppend(&text, absl::StrFormat(" [%d] got %.9g want %.9g;", m.index, m.got, m.want));
    }
    return text;
  }
};

// Whether got matches want under the tolerance (exact: bit-equal for int32 / fp8 codes and
// value-equal for floats, NaN matching NaN).
inline bool Matches(double got, double want, double atol, double rtol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (got == want) return true;
  if (std::isinf(got) || std::isinf(want)) return false;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

// `tolerate(index, got, want)`, when given, may accept a mismatch (counted in `tolerated`).
inline TensorComparison CompareTensors(
    absl::string_view name, absl::string_view role, const Tensor& got, const Tensor& want,
    double atol, double rtol,
    const std::function<bool(size_t, double, double)>& tolerate = nullptr) {
  TensorComparison c;
  c.name = std::string(name);
  c.role = std::string(role);
  c.elem = want.elem;
  c.exact = IsExactElem(want.elem) || (atol == 0 && rtol == 0);
  c.atol = c.exact ? 0 : atol;
  c.rtol = c.exact ? 0 : rtol;
  if (got.elem != want.elem || got.null != want.null || got.size() != want.size()) {
    c.problem =
        absl::StrCat("got ", got.null ? "null" : absl::StrCat(got.size(), " ", ElemName(got.elem)),
                     " elements, want ",
                     want.null ? "null" : absl::StrCat(want.size(), " ", ElemName(want.elem)));
    return c;
  }
  c.count = want.size();
  for (size_t k = 0; k < c.count; ++k) {
    bool same;
    if (want.elem == launch::Elem::kI32) {
      same = got.i[k] == want.i[k];
    } else if (want.elem == launch::Elem::kFp8E4M3) {
      same = got.q[k] == want.q[k];
    } else {
      same = Matches(got.f[k], want.f[k], c.atol, c.rtol);
    }
    if (same) continue;
    const double g = got.Value(k), w = want.Value(k);
    if (tolerate && tolerate(k, g, w)) {
      ++c.tolerated;
      continue;
    }
    const double error = std::isnan(g - w) ? INFINITY : std::fabs(g - w);
    if (c.mismatches == 0 || error > c.max_abs_error) {
      c.max_abs_error = error;
      c.worst_index = k;
    }
    if (c.first.size() < kListedMismatches) c.first.push_back({k, g, w});
    ++c.mismatches;
  }
  return c;
}

// Whether the reference, run for one row of `input` with its uniform and/or top_p moved by
// `delta`, picks `pick`: the GPU's float sums put that row's draw on the other side of a
// cumulative-mass boundary. Only for top_k_top_p_sample problems.
inline bool SampleBoundaryExplains(const Problem& input, size_t row, int32_t pick,
                                   double delta = kSampleBoundaryDelta) {
  const int logits = input.Find("logits"), uniform = input.Find("uniform");
  const int n = input.Find("n"), temperature = input.Find("temperature");
  const int top_k = input.Find("top_k"), top_p = input.Find("top_p");
  if (logits < 0 || uniform < 0 || n < 0 || temperature < 0 || top_k < 0 || top_p < 0) {
    return false;
  }
  const int columns = static_cast<int>(input.scalars[n]);
  const float* row_logits = input.tensors[logits].f.data() + row * columns;
  for (double du : {-delta, 0.0, delta}) {
    for (double dp : {-delta, 0.0, delta}) {
      if (du == 0 && dp == 0) continue;
      const float u = std::clamp(static_cast<float>(input.tensors[uniform].f[row] + du), 0.f,
                                 std::nextafter(1.f, 0.f));
      const float p = static_cast<float>(input.scalars[top_p] + dp);
      int32_t sampled = -1;
      reference::top_k_top_p_sample(row_logits, &u, &sampled, 1, columns,
                                    static_cast<float>(input.scalars[temperature]),
                                    static_cast<int>(input.scalars[top_k]), p);
      if (sampled == pick) return true;
    }
  }
  return false;
}

// Compares every pointer argument of `got` (the kernel's result): outputs and in/out tensors
// with `want` (the reference's result) under the entry's tolerance, inputs with `input`
// exactly. One entry per pointer argument, in parameter order.
inline std::vector<TensorComparison> CompareProblem(const Problem& input, const Problem& want,
                                                    const Problem& got) {
  const launch::EntryPoint& entry = *input.entry;
  const bool sampler = absl::string_view(entry.reference) == "top_k_top_p_sample";
  std::vector<TensorComparison> out;
  for (size_t k = 0; k < entry.num_params; ++k) {
    const launch::Param& param = entry.params[k];
    if (param.arg != launch::Arg::kPointer) continue;
    if (param.access == launch::Access::kIn) {
      out.push_back(CompareTensors(param.name, "input", got.tensors[k], input.tensors[k], 0, 0));
      continue;
    }
    std::function<bool(size_t, double, double)> tolerate;
    if (sampler && absl::string_view(param.name) == "sampled") {
      tolerate = [&input](size_t row, double g, double) {
        return SampleBoundaryExplains(input, row, static_cast<int32_t>(g));
      };
    }
    out.push_back(CompareTensors(param.name, "output", got.tensors[k], want.tensors[k], entry.atol,
                                 entry.rtol, tolerate));
  }
  return out;
}

}  // namespace kcache::gpu_test

#endif  // KCACHE_TESTS_GPU_COMPARE_OUTPUTS_H_
