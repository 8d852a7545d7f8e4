// CPU reference implementations of the bundled kernels (kernels/*.cu), plain C++17.
//
// Each function has the argument layout of its GPU entry point (see launch.h). fp16, bf16 and
// fp8 tensors are passed as float arrays holding values that are exactly representable in the
// element type (convert raw bits with the helpers below); outputs are rounded to the kernel's
// output type, so a GPU result converted to float compares directly. Math is fp32/fp64; results
// match the GPU up to the per-entry tolerances in launch.h (fp8 quantize/dequantize and
// moe_align match exactly).
#pragma once

#include <cstdint>

namespace kcache::reference {

// ---- scalar formats -------------------------------------------------------------------------
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);  // round to nearest even, overflow to inf
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);  // round to nearest even
// FP8 E4M3 ("e4m3fn": bias 7, max 448, no inf, NaN = 0x7f/0xff).
float e4m3_to_float(uint8_t bits);
// Round to nearest even, saturating to +-448 (inf included); NaN -> 0x7f. Same as CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3).
uint8_t float_to_e4m3(float value);

enum class DType { kF32, kF16, kBF16 };
// value after a conversion to `type` and back.
float round_to(DType type, float value);

// ---- kernels --------------------------------------------------------------------------------
// timestep_embedding<T>: timesteps [n], out [n, dim]; out rounded to `type`.
void timestep_embedding(DType type, const float* timesteps, float* out, int n, int dim,
                        float max_period, float downscale_freq_shift, float scale,
                        int flip_sin_to_cos);

// geglu_f16 (tanh_approx: variant geglu.tanh): in [rows, 2*d] = [x | gate], out [rows, d].
void geglu(const float* in, float* out, int rows, int d, bool tanh_approx);

// group_norm_f16: x, y [N, C, HW]; gamma, beta [C].
void group_norm(const float* x, const float* gamma, const float* beta, float* y, int N, int C,
                int HW, int G, float eps, int apply_silu);

// rms_norm<T>, layer_norm<T>: x, y [rows, cols]; w / gamma / beta [cols].
void rms_norm(DType type, const float* x, const float* w, float* y, int rows, int cols, float eps);
void layer_norm(DType type, const float* x, const float* gamma, const float* beta, float* y,
                int rows, int cols, float eps);

// softmax<T>: y = softmax(scale * x) per row; -inf entries give 0, an all -inf row gives zeros.
void softmax(DType type, const float* x, float* y, int rows, int cols, float scale);

// attention_f16_d64: q, o [bh, lq, 64]; k, v [bh, lk, 64]. accum_half emulates the
// attention.fp16_accum variant (fp16 q.k and p.v accumulation in the kernel's order).
constexpr int kAttentionHeadDim = 64;
void attention(const float* q, const float* k, const float* v, float* o, int batch_heads, int lq,
               int lk, float scale, int causal, bool accum_half);

// rotary_embedding<T>: in place on q [tokens, heads_q, head_dim] and k [tokens, heads_k,
// head_dim] (k may be null).
void rotary_embedding(DType type, const int32_t* positions, float* q, float* k, int tokens,
                      int heads_q, int heads_k, int head_dim, int rot_dim, float base);

// linear_bf16_sm80: y [M, N] = x [M, K] . w [N, K]^T + bias [N] (bias may be null); bf16 out.
void linear_bf16(const float* x, const float* w, const float* bias, float* y, int M, int N, int K);

// fp8_e4m3 kernels. q / w hold E4M3 bit patterns; x, y are fp16 values.
void fp8_amax(const float* x, float* amax, int n);  // amax[0] = max(amax[0], max |x|)
void fp8_quantize_e4m3(const float* x, uint8_t* q, const float* scale, int n);
void fp8_dequantize_e4m3(const uint8_t* q, float* y, const float* scale, int n);
void fp8_gemv_e4m3(const uint8_t* w, const float* x, float* y, const float* w_scale, int N, int K);

// moe_topk_softmax<T, BLOCK, ITEMS>: logits [tokens, num_experts] (values of T),
// topk_weights / topk_ids [tokens, k]. Requires k <= num_experts <= BLOCK * ITEMS.
void moe_topk_softmax(const float* logits, float* topk_weights, int32_t* topk_ids, int tokens,
                      int num_experts, int k, int renormalize);

// moe_align<BLOCK, ITEMS>: expert_offsets [num_experts + 1], sorted_ids [capacity],
// block_expert_ids [capacity] (entries past total / align are left untouched).
void moe_align(const int32_t* topk_ids, int numel, int num_experts, int align, int capacity,
               int32_t* expert_offsets, int32_t* sorted_ids, int32_t* block_expert_ids);

// top_k_top_p_sample<T, BLOCK, ITEMS>: logits [rows, n] (values of T), uniform [rows] in [0, 1),
// sampled [rows]. The GPU sums in float in a different order, so a draw whose uniform lies
// within float rounding of a cumulative-mass boundary may pick the neighbouring candidate.
void top_k_top_p_sample(const float* logits, const float* uniform, int32_t* sampled, int rows,
                        int n, float temperature, int top_k, float top_p);

}  // namespace kcache::reference
