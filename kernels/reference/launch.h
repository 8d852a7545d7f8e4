// Launch table for the bundled kernels: for every entry point (one row per compiled kernel
// and lowered symbol), the symbol or name expression to look up, the grid / block / shared
// memory rule, the parameter list in order, how to fill inputs for a test, the matching CPU
// reference (reference.h) and the tolerance to compare with. Plain constexpr data, no CUDA
// includes: a generic launcher evaluates the Expr rules against the scalar arguments.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kcache::reference::launch {

enum class Arg : uint8_t { kPointer, kInt32, kFloat32 };
enum class Elem : uint8_t { kNone, kF32, kF16, kBF16, kI32, kFp8E4M3 };
enum class Access : uint8_t { kValue, kIn, kOut, kInOut };

// Integer rule over the entry point's scalar (kInt32) arguments:
//   value = ceil_div(mul * arg(f0) * arg(f1) * arg(f2) + add, div), then min(value, cap) if
//   cap > 0. A null factor counts as 1. Used for buffer lengths (elements) and grid sizes.
struct Expr {
  const char* f0;
  const char* f1;
  const char* f2;
  int64_t mul;
  int64_t add;
  int64_t div;
  int64_t cap;
};
constexpr Expr Const(int64_t v) { return {nullptr, nullptr, nullptr, 0, v, 1, 0}; }
constexpr Expr Of(const char* a, const char* b = nullptr, const char* c = nullptr,
                  int64_t mul = 1) {
  return {a, b, c, mul, 0, 1, 0};
}
constexpr Expr Plus(Expr e, int64_t add) {
  return {e.f0, e.f1, e.f2, e.mul, e.add + add, e.div, e.cap};
}
constexpr Expr CeilDiv(Expr e, int64_t div) { return {e.f0, e.f1, e.f2, e.mul, e.add, div, e.cap}; }
constexpr Expr Cap(Expr e, int64_t cap) { return {e.f0, e.f1, e.f2, e.mul, e.add, e.div, cap}; }

// How a test fills a buffer before the launch.
enum class Fill : uint8_t {
  kNone,        // output only; contents irrelevant
  kZero,        // zero bytes
  kUniform,     // floats uniform in [lo, hi), then rounded to the element type
  kIntUniform,  // int32 uniform in [lo, hi) (hi_arg, when set, names a scalar argument for hi)
  kConst,       // every element = lo
  kFp8Uniform,  // E4M3 bit patterns of values uniform in [lo, hi)
};
struct Init {
  Fill fill;
  double lo;
  double hi;
  const char* hi_arg;
};
constexpr Init NoInit() { return {Fill::kNone, 0, 0, nullptr}; }

struct Param {
  const char* name;
  Arg arg;
  Elem elem;  // pointers: element type
  Access access;
  Expr length;     // pointers: element count
  bool nullable;   // pointers: null is a valid argument
  Init init;       // pointers: test input
  double example;  // scalars: a small valid value (tests use these as the default problem)
};
constexpr Param In(const char* n, Elem e, Expr len, Init init = {Fill::kUniform, -1, 1, nullptr}) {
  return {n, Arg::kPointer, e, Access::kIn, len, false, init, 0};
}
constexpr Param InOpt(const char* n, Elem e, Expr len,
                      Init init = {Fill::kUniform, -1, 1, nullptr}) {
  return {n, Arg::kPointer, e, Access::kIn, len, true, init, 0};
}
constexpr Param Out(const char* n, Elem e, Expr len) {
  return {n, Arg::kPointer, e, Access::kOut, len, false, NoInit(), 0};
}
constexpr Param InOut(const char* n, Elem e, Expr len,
                      Init init = {Fill::kUniform, -1, 1, nullptr}) {
  return {n, Arg::kPointer, e, Access::kInOut, len, false, init, 0};
}
constexpr Param InOutOpt(const char* n, Elem e, Expr len,
                         Init init = {Fill::kUniform, -1, 1, nullptr}) {
  return {n, Arg::kPointer, e, Access::kInOut, len, true, init, 0};
}
constexpr Param I32(const char* n, int example) {
  return {n,        Arg::kInt32, Elem::kNone, Access::kValue,
          Const(0), false,       NoInit(),    static_cast<double>(example)};
}
constexpr Param F32(const char* n, double example) {
  return {n, Arg::kFloat32, Elem::kNone, Access::kValue, Const(0), false, NoInit(), example};
}

struct EntryPoint {
  const char* kernel;    // manifest kernel id name ("attention.fp16_accum" for a variant)
  const char* symbol;    // name expression (templates) or extern "C" symbol
  bool name_expression;  // true: lower `symbol` with nvrtcAddNameExpression
  int min_sm;            // e.g. 75, 80, 89
  Expr grid[3];
  int block[3];
  int dynamic_smem;  // bytes; all bundled kernels use static shared memory only
  const Param* params;
  size_t num_params;
  const char* reference;  // reference.h call, with its fixed arguments
  double atol;            // |gpu - ref| <= atol + rtol * |ref| element-wise
  double rtol;
};

// ---- parameter lists --------------------------------------------------------------------
#define KC_PARAMS(name, ...) inline constexpr Param name[] = {__VA_ARGS__}

KC_PARAMS(kTimestepF16, In("timesteps", Elem::kF32, Of("n"), {Fill::kUniform, 0, 1000, nullptr}),
          Out("out", Elem::kF16, Of("n", "dim")), I32("n", 4), I32("dim", 321),
          F32("max_period", 10000), F32("downscale_freq_shift", 1), F32("scale", 1),
          I32("flip_sin_to_cos", 1));
KC_PARAMS(kTimestepBF16, In("timesteps", Elem::kF32, Of("n"), {Fill::kUniform, 0, 1000, nullptr}),
          Out("out", Elem::kBF16, Of("n", "dim")), I32("n", 4), I32("dim", 320),
          F32("max_period", 10000), F32("downscale_freq_shift", 0), F32("scale", 1),
          I32("flip_sin_to_cos", 0));
KC_PARAMS(kTimestepF32, In("timesteps", Elem::kF32, Of("n"), {Fill::kUniform, 0, 1000, nullptr}),
          Out("out", Elem::kF32, Of("n", "dim")), I32("n", 4), I32("dim", 256),
          F32("max_period", 10000), F32("downscale_freq_shift", 1), F32("scale", 1),
          I32("flip_sin_to_cos", 1));
KC_PARAMS(kGeglu,
          In("in", Elem::kF16, Of("rows", "d", nullptr, 2), {Fill::kUniform, -4, 4, nullptr}),
          Out("out", Elem::kF16, Of("rows", "d")), I32("rows", 7), I32("d", 640));
KC_PARAMS(kGroupNorm, In("x", Elem::kF16, Of("N", "C", "HW"), {Fill::kUniform, -3, 3, nullptr}),
          In("gamma", Elem::kF16, Of("C")), In("beta", Elem::kF16, Of("C")),
          Out("y", Elem::kF16, Of("N", "C", "HW")), I32("N", 2), I32("C", 64), I32("HW", 100),
          I32("G", 32), F32("eps", 1e-5), I32("apply_silu", 1));
KC_PARAMS(kRmsNormF16, In("x", Elem::kF16, Of("rows", "cols"), {Fill::kUniform, -2, 2, nullptr}),
          In("w", Elem::kF16, Of("cols")), Out("y", Elem::kF16, Of("rows", "cols")), I32("rows", 5),
          I32("cols", 1000), F32("eps", 1e-6));
KC_PARAMS(kRmsNormBF16, In("x", Elem::kBF16, Of("rows", "cols"), {Fill::kUniform, -2, 2, nullptr}),
          In("w", Elem::kBF16, Of("cols")), Out("y", Elem::kBF16, Of("rows", "cols")),
          I32("rows", 5), I32("cols", 1000), F32("eps", 1e-6));
KC_PARAMS(kLayerNormF16, In("x", Elem::kF16, Of("rows", "cols"), {Fill::kUniform, -2, 2, nullptr}),
          In("gamma", Elem::kF16, Of("cols")), In("beta", Elem::kF16, Of("cols")),
          Out("y", Elem::kF16, Of("rows", "cols")), I32("rows", 5), I32("cols", 1000),
          F32("eps", 1e-5));
KC_PARAMS(kLayerNormBF16,
          In("x", Elem::kBF16, Of("rows", "cols"), {Fill::kUniform, -2, 2, nullptr}),
          In("gamma", Elem::kBF16, Of("cols")), In("beta", Elem::kBF16, Of("cols")),
          Out("y", Elem::kBF16, Of("rows", "cols")), I32("rows", 5), I32("cols", 1000),
          F32("eps", 1e-5));
KC_PARAMS(kSoftmaxF32, In("x", Elem::kF32, Of("rows", "cols"), {Fill::kUniform, -8, 8, nullptr}),
          Out("y", Elem::kF32, Of("rows", "cols")), I32("rows", 6), I32("cols", 1000),
          F32("scale", 0.5));
KC_PARAMS(kSoftmaxF16, In("x", Elem::kF16, Of("rows", "cols"), {Fill::kUniform, -8, 8, nullptr}),
          Out("y", Elem::kF16, Of("rows", "cols")), I32("rows", 6), I32("cols", 1000),
          F32("scale", 0.5));
KC_PARAMS(kSoftmaxBF16, In("x", Elem::kBF16, Of("rows", "cols"), {Fill::kUniform, -8, 8, nullptr}),
          Out("y", Elem::kBF16, Of("rows", "cols")), I32("rows", 6), I32("cols", 1000),
          F32("scale", 0.5));
KC_PARAMS(kAttention, In("q", Elem::kF16, Of("batch_heads", "lq", nullptr, 64)),
          In("k", Elem::kF16, Of("batch_heads", "lk", nullptr, 64)),
          In("v", Elem::kF16, Of("batch_heads", "lk", nullptr, 64)),
          Out("o", Elem::kF16, Of("batch_heads", "lq", nullptr, 64)), I32("batch_heads", 3),
          I32("lq", 77), I32("lk", 150), F32("scale", 0.125), I32("causal", 1));
KC_PARAMS(kRopeF16,
          In("positions", Elem::kI32, Of("tokens"), {Fill::kIntUniform, 0, 4096, nullptr}),
          InOut("q", Elem::kF16, Of("tokens", "heads_q", "head_dim")),
          InOutOpt("k", Elem::kF16, Of("tokens", "heads_k", "head_dim")), I32("tokens", 9),
          I32("heads_q", 8), I32("heads_k", 2), I32("head_dim", 128), I32("rot_dim", 64),
          F32("base", 10000));
KC_PARAMS(kRopeBF16,
          In("positions", Elem::kI32, Of("tokens"), {Fill::kIntUniform, 0, 4096, nullptr}),
          InOut("q", Elem::kBF16, Of("tokens", "heads_q", "head_dim")),
          InOutOpt("k", Elem::kBF16, Of("tokens", "heads_k", "head_dim")), I32("tokens", 9),
          I32("heads_q", 8), I32("heads_k", 2), I32("head_dim", 128), I32("rot_dim", 128),
          F32("base", 500000));
KC_PARAMS(kLinear, In("x", Elem::kBF16, Of("M", "K")), In("w", Elem::kBF16, Of("N", "K")),
          InOpt("bias", Elem::kBF16, Of("N")), Out("y", Elem::kBF16, Of("M", "N")), I32("M", 70),
          I32("N", 136), I32("K", 200));
KC_PARAMS(kFp8Amax, In("x", Elem::kF16, Of("n"), {Fill::kUniform, -100, 100, nullptr}),
          InOut("amax", Elem::kF32, Const(1), {Fill::kZero, 0, 0, nullptr}), I32("n", 10001));
KC_PARAMS(kFp8Quantize, In("x", Elem::kF16, Of("n"), {Fill::kUniform, -100, 100, nullptr}),
          Out("q", Elem::kFp8E4M3, Of("n")),
          In("scale", Elem::kF32, Const(1), {Fill::kConst, 100.0 / 448.0, 0, nullptr}),
          I32("n", 10001));
KC_PARAMS(kFp8Dequantize, In("q", Elem::kFp8E4M3, Of("n"), {Fill::kFp8Uniform, -448, 448, nullptr}),
          Out("y", Elem::kF16, Of("n")),
          In("scale", Elem::kF32, Const(1), {Fill::kConst, 0.05, 0, nullptr}), I32("n", 10001));
KC_PARAMS(kFp8Gemv, In("w", Elem::kFp8E4M3, Of("N", "K"), {Fill::kFp8Uniform, -448, 448, nullptr}),
          In("x", Elem::kF16, Of("K")), Out("y", Elem::kF16, Of("N")),
          In("w_scale", Elem::kF32, Const(1), {Fill::kConst, 1.0 / 448.0, 0, nullptr}),
          I32("N", 37), I32("K", 512));
KC_PARAMS(kMoeTopkF32,
          In("logits", Elem::kF32, Of("tokens", "num_experts"), {Fill::kUniform, -4, 4, nullptr}),
          Out("topk_weights", Elem::kF32, Of("tokens", "k")),
          Out("topk_ids", Elem::kI32, Of("tokens", "k")), I32("tokens", 33), I32("num_experts", 60),
          I32("k", 4), I32("renormalize", 1));
KC_PARAMS(kMoeTopkF16,
          In("logits", Elem::kF16, Of("tokens", "num_experts"), {Fill::kUniform, -4, 4, nullptr}),
          Out("topk_weights", Elem::kF32, Of("tokens", "k")),
          Out("topk_ids", Elem::kI32, Of("tokens", "k")), I32("tokens", 33), I32("num_experts", 8),
          I32("k", 2), I32("renormalize", 0));
KC_PARAMS(kMoeTopkBF16,
          In("logits", Elem::kBF16, Of("tokens", "num_experts"), {Fill::kUniform, -4, 4, nullptr}),
          Out("topk_weights", Elem::kF32, Of("tokens", "k")),
          Out("topk_ids", Elem::kI32, Of("tokens", "k")), I32("tokens", 17),
          I32("num_experts", 256), I32("k", 8), I32("renormalize", 1));
KC_PARAMS(kSampleF32, In("logits", Elem::kF32, Of("rows", "n"), {Fill::kUniform, -8, 8, nullptr}),
          In("uniform", Elem::kF32, Of("rows"), {Fill::kUniform, 0, 1, nullptr}),
          Out("sampled", Elem::kI32, Of("rows")), I32("rows", 9), I32("n", 4000),
          F32("temperature", 0.8), I32("top_k", 50), F32("top_p", 0.9));
KC_PARAMS(kSampleF16, In("logits", Elem::kF16, Of("rows", "n"), {Fill::kUniform, -8, 8, nullptr}),
          In("uniform", Elem::kF32, Of("rows"), {Fill::kUniform, 0, 1, nullptr}),
          Out("sampled", Elem::kI32, Of("rows")), I32("rows", 9), I32("n", 1000),
          F32("temperature", 1.0), I32("top_k", 0), F32("top_p", 0.95));
KC_PARAMS(kSampleBF16, In("logits", Elem::kBF16, Of("rows", "n"), {Fill::kUniform, -8, 8, nullptr}),
          In("uniform", Elem::kF32, Of("rows"), {Fill::kUniform, 0, 1, nullptr}),
          Out("sampled", Elem::kI32, Of("rows")), I32("rows", 9), I32("n", 4096),
          F32("temperature", 0.0), I32("top_k", 0), F32("top_p", 1.0));
KC_PARAMS(kSampleF32Large,
          In("logits", Elem::kF32, Of("rows", "n"), {Fill::kUniform, -8, 8, nullptr}),
          In("uniform", Elem::kF32, Of("rows"), {Fill::kUniform, 0, 1, nullptr}),
          Out("sampled", Elem::kI32, Of("rows")), I32("rows", 5), I32("n", 8000),
          F32("temperature", 0.7), I32("top_k", 1000), F32("top_p", 0.8));
KC_PARAMS(kMoeAlignSmall,
          In("topk_ids", Elem::kI32, Of("numel"), {Fill::kIntUniform, 0, 0, "num_experts"}),
          I32("numel", 1000), I32("num_experts", 64), I32("align", 16), I32("capacity", 2000),
          Out("expert_offsets", Elem::kI32, Plus(Of("num_experts"), 1)),
          Out("sorted_ids", Elem::kI32, Of("capacity")),
          Out("block_expert_ids", Elem::kI32, Of("capacity")));
KC_PARAMS(kMoeAlignLarge,
          In("topk_ids", Elem::kI32, Of("numel"), {Fill::kIntUniform, 0, 0, "num_experts"}),
          I32("numel", 3000), I32("num_experts", 1000), I32("align", 4), I32("capacity", 6000),
          Out("expert_offsets", Elem::kI32, Plus(Of("num_experts"), 1)),
          Out("sorted_ids", Elem::kI32, Of("capacity")),
          Out("block_expert_ids", Elem::kI32, Of("capacity")));

#undef KC_PARAMS

// ---- entry points -----------------------------------------------------------------------
#define KC_ENTRY(kernel, symbol, expr, sm, g0, g1, g2, bx, params, ref, atol, rtol) \
  EntryPoint {                                                                      \
    kernel, symbol, expr, sm, {g0, g1, g2}, {bx, 1, 1}, 0, params,                  \
        sizeof(params) / sizeof(params[0]), ref, atol, rtol                         \
  }

inline constexpr EntryPoint kEntryPoints[] = {
    KC_ENTRY("timestep_embedding", "timestep_embedding<__half>", true, 75, Of("n"), Const(1),
             Const(1), 256, kTimestepF16, "timestep_embedding(DType::kF16, ...)", 2e-3, 2e-3),
    KC_ENTRY("timestep_embedding", "timestep_embedding<__nv_bfloat16>", true, 75, Of("n"), Const(1),
             Const(1), 256, kTimestepBF16, "timestep_embedding(DType::kBF16, ...)", 1e-2, 1e-2),
    KC_ENTRY("timestep_embedding", "timestep_embedding<float>", true, 75, Of("n"), Const(1),
             Const(1), 256, kTimestepF32, "timestep_embedding(DType::kF32, ...)", 5e-4, 0),
    KC_ENTRY("geglu", "geglu_f16", false, 75, Cap(CeilDiv(Of("rows", "d"), 2048), 65535), Const(1),
             Const(1), 256, kGeglu, "geglu(..., tanh_approx=false)", 1e-3, 2e-3),
    KC_ENTRY("geglu.tanh", "geglu_f16", false, 75, Cap(CeilDiv(Of("rows", "d"), 2048), 65535),
             Const(1), Const(1), 256, kGeglu, "geglu(..., tanh_approx=true)", 1e-3, 2e-3),
    KC_ENTRY("group_norm", "group_norm_f16", false, 75, Of("N", "G"), Const(1), Const(1), 512,
             kGroupNorm, "group_norm", 2e-3, 4e-3),
    KC_ENTRY("norm", "rms_norm<__half>", true, 75, Of("rows"), Const(1), Const(1), 256, kRmsNormF16,
             "rms_norm(DType::kF16, ...)", 1e-3, 4e-3),
    KC_ENTRY("norm", "rms_norm<__nv_bfloat16>", true, 75, Of("rows"), Const(1), Const(1), 256,
             kRmsNormBF16, "rms_norm(DType::kBF16, ...)", 1e-2, 1.6e-2),
    KC_ENTRY("norm", "layer_norm<__half>", true, 75, Of("rows"), Const(1), Const(1), 256,
             kLayerNormF16, "layer_norm(DType::kF16, ...)", 2e-3, 4e-3),
    KC_ENTRY("norm", "layer_norm<__nv_bfloat16>", true, 75, Of("rows"), Const(1), Const(1), 256,
             kLayerNormBF16, "layer_norm(DType::kBF16, ...)", 1e-2, 1.6e-2),
    KC_ENTRY("softmax", "softmax<float>", true, 75, Of("rows"), Const(1), Const(1), 256,
             kSoftmaxF32, "softmax(DType::kF32, ...)", 1e-6, 1e-5),
    KC_ENTRY("softmax", "softmax<__half>", true, 75, Of("rows"), Const(1), Const(1), 256,
             kSoftmaxF16, "softmax(DType::kF16, ...)", 1e-5, 2e-3),
    KC_ENTRY("softmax", "softmax<__nv_bfloat16>", true, 75, Of("rows"), Const(1), Const(1), 256,
             kSoftmaxBF16, "softmax(DType::kBF16, ...)", 1e-4, 1.6e-2),
    KC_ENTRY("attention", "attention_f16_d64", false, 75, CeilDiv(Of("lq"), 64), Of("batch_heads"),
             Const(1), 128, kAttention, "attention(..., accum_half=false)", 2e-3, 4e-3),
    KC_ENTRY("attention.fp16_accum", "attention_f16_d64", false, 75, CeilDiv(Of("lq"), 64),
             Of("batch_heads"), Const(1), 128, kAttention, "attention(..., accum_half=true)", 4e-3,
             1e-2),
    KC_ENTRY("rotary_embedding", "rotary_embedding<__half>", true, 75, Of("tokens"), Const(1),
             Const(1), 256, kRopeF16, "rotary_embedding(DType::kF16, ...)", 4e-3, 2e-3),
    KC_ENTRY("rotary_embedding", "rotary_embedding<__nv_bfloat16>", true, 75, Of("tokens"),
             Const(1), Const(1), 256, kRopeBF16, "rotary_embedding(DType::kBF16, ...)", 1e-2,
             1.6e-2),
    KC_ENTRY("linear_bf16_sm80", "linear_bf16_sm80", false, 80, CeilDiv(Of("N"), 64),
             CeilDiv(Of("M"), 64), Const(1), 128, kLinear, "linear_bf16", 1e-2, 1.6e-2),
    KC_ENTRY("fp8_e4m3", "fp8_amax_f16", false, 89, Cap(CeilDiv(Of("n"), 512), 1024), Const(1),
             Const(1), 256, kFp8Amax, "fp8_amax", 0, 0),
    KC_ENTRY("fp8_e4m3", "fp8_quantize_e4m3_f16", false, 89, Cap(CeilDiv(Of("n"), 512), 65535),
             Const(1), Const(1), 256, kFp8Quantize, "fp8_quantize_e4m3", 0, 0),
    KC_ENTRY("fp8_e4m3", "fp8_dequantize_e4m3_f16", false, 89, Cap(CeilDiv(Of("n"), 512), 65535),
             Const(1), Const(1), 256, kFp8Dequantize, "fp8_dequantize_e4m3", 0, 0),
    KC_ENTRY("fp8_e4m3", "fp8_gemv_e4m3", false, 89, CeilDiv(Of("N"), 8), Const(1), Const(1), 256,
             kFp8Gemv, "fp8_gemv_e4m3", 1e-2, 4e-3),
    KC_ENTRY("moe_routing", "moe_topk_softmax<float, 64, 4>", true, 75, Of("tokens"), Const(1),
             Const(1), 64, kMoeTopkF32, "moe_topk_softmax", 1e-6, 1e-5),
    KC_ENTRY("moe_routing", "moe_topk_softmax<__half, 64, 4>", true, 75, Of("tokens"), Const(1),
             Const(1), 64, kMoeTopkF16, "moe_topk_softmax", 1e-6, 1e-5),
    KC_ENTRY("moe_routing", "moe_topk_softmax<__nv_bfloat16, 64, 4>", true, 75, Of("tokens"),
             Const(1), Const(1), 64, kMoeTopkBF16, "moe_topk_softmax", 1e-6, 1e-5),
    KC_ENTRY("moe_routing", "moe_align<256, 1>", true, 75, Const(1), Const(1), Const(1), 256,
             kMoeAlignSmall, "moe_align", 0, 0),
    KC_ENTRY("moe_routing", "moe_align<256, 4>", true, 75, Const(1), Const(1), Const(1), 256,
             kMoeAlignLarge, "moe_align", 0, 0),
    // Sampled ids match exactly except, rarely, when a uniform lies within float rounding of a
    // cumulative-mass boundary (see reference.h).
    KC_ENTRY("moe_routing", "top_k_top_p_sample<float, 256, 16>", true, 75, Of("rows"), Const(1),
             Const(1), 256, kSampleF32, "top_k_top_p_sample", 0, 0),
    KC_ENTRY("moe_routing", "top_k_top_p_sample<__half, 256, 16>", true, 75, Of("rows"), Const(1),
             Const(1), 256, kSampleF16, "top_k_top_p_sample", 0, 0),
    KC_ENTRY("moe_routing", "top_k_top_p_sample<__nv_bfloat16, 256, 16>", true, 75, Of("rows"),
             Const(1), Const(1), 256, kSampleBF16, "top_k_top_p_sample", 0, 0),
    KC_ENTRY("moe_routing", "top_k_top_p_sample<float, 512, 16>", true, 75, Of("rows"), Const(1),
             Const(1), 512, kSampleF32Large, "top_k_top_p_sample", 0, 0),
};

#undef KC_ENTRY

inline constexpr size_t kNumEntryPoints = sizeof(kEntryPoints) / sizeof(kEntryPoints[0]);

// Evaluates an Expr; `arg` maps a scalar argument name to its value.
template <typename ArgFn>
constexpr int64_t Eval(const Expr& e, ArgFn&& arg) {
  int64_t v = e.mul;
  if (e.f0) v *= arg(e.f0);
  if (e.f1) v *= arg(e.f1);
  if (e.f2) v *= arg(e.f2);
  v = (v + e.add + e.div - 1) / e.div;
  return (e.cap > 0 && v > e.cap) ? e.cap : v;
}

}  // namespace kcache::reference::launch
