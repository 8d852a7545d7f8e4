#include "kernels/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace kcache::reference {
namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round a double to fp16 (nearest even) in one step, for the fp16-accumulation emulation.
uint16_t double_to_half(double v) {
  if (std::isnan(v)) return 0x7e00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7c00;
  int e;
  std::frexp(a, &e);                     // a = f * 2^e, f in [0.5, 1)
  const int exp = std::max(e - 1, -14);  // subnormals share the 2^-14 scale
  const double quantum = std::ldexp(1.0, exp - 10);
  const double r = std::nearbyint(a / quantum) * quantum;
  return float_to_half(static_cast<float>(r)) | sign;  // r is exactly representable
}

float h(double v) { return half_to_float(double_to_half(v)); }

}  // namespace

// ---- scalar formats -------------------------------------------------------------------------

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exp = (bits >> 10) & 0x1f;
  const uint32_t mant = bits & 0x3ff;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000 | (mant << 13));
  return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_half(float value) {
  const uint32_t x = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return sign | 0x7e00;   // NaN
  if (ax >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to inf
  if (ax < 0x38800000) {                       // below 2^-14: subnormal (or zero)
    const float q = std::nearbyint(bits_float(ax) * 16777216.0f);  // units of 2^-24, exact scale
    return sign | static_cast<uint16_t>(q);  // q == 1024 is the smallest normal
  }
  uint32_t hv = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffff) >> 13));
  const uint32_t rem = ax & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (hv & 1))) ++hv;
  return sign | static_cast<uint16_t>(hv);
}

float bf16_to_float(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16(float value) {
  const uint32_t x = float_bits(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float e4m3_to_float(uint8_t bits) {
  const int exp = (bits >> 3) & 0xf, mant = bits & 7;
  float v;
  if (exp == 15 && mant == 7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -9);
  } else {
    v = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return (bits & 0x80) ? -v : v;
}

uint8_t float_to_e4m3(float value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(value));
  if (a > 464.0) return sign | 0x7e;           // past 448 + half an ulp: saturate
  if (a <= std::ldexp(1.0, -10)) return sign;  // at most half the smallest subnormal
  int e;
  std::frexp(a, &e);
  const int exp = std::max(e - 1, -6);  // subnormals share the 2^-6 scale
  const double quantum = std::ldexp(1.0, exp - 3);
  const double r = std::nearbyint(a / quantum) * quantum;  // ties to even; <= 448 here
  std::frexp(r, &e);
  const int re = e - 1;
  if (re < -6) return sign | static_cast<uint8_t>(r / std::ldexp(1.0, -9));
  const int mant = static_cast<int>((r / std::ldexp(1.0, re) - 1.0) * 8.0);
  return sign | static_cast<uint8_t>(((re + 7) << 3) | mant);
}

float round_to(DType type, float value) {
  switch (type) {
    case DType::kF16:
      return half_to_float(float_to_half(value));
    case DType::kBF16:
      return bf16_to_float(float_to_bf16(value));
    case DType::kF32:
      break;
  }
  return value;
}

// ---- kernels --------------------------------------------------------------------------------

void timestep_embedding(DType type, const float* timesteps, float* out, int n, int dim,
                        float max_period, float downscale_freq_shift, float scale,
                        int flip_sin_to_cos) {
  const int half_dim = dim / 2;
  const float log_period = std::log(max_period);
  const float denom = static_cast<float>(half_dim) - downscale_freq_shift;
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < dim; ++c) {
      float v = 0.f;
      if (c < 2 * half_dim) {
        const bool first = c < half_dim;
        const int j = first ? c : c - half_dim;
        const float freq = std::exp(-log_period * static_cast<float>(j) / denom);
        const double arg = scale * (timesteps[r] * freq);
        const bool use_sin = first != (flip_sin_to_cos != 0);
        v = static_cast<float>(use_sin ? std::sin(arg) : std::cos(arg));
      }
      out[static_cast<size_t>(r) * dim + c] = round_to(type, v);
    }
  }
}

void geglu(const float* in, float* out, int rows, int d, bool tanh_approx) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < d; ++c) {
      const float x = in[static_cast<size_t>(r) * 2 * d + c];
      const float g = in[static_cast<size_t>(r) * 2 * d + d + c];
      float gelu;
      if (tanh_approx) {
        gelu = 0.5f * g * (1.f + std::tanh(0.7978845608028654f * (g + 0.044715f * g * g * g)));
      } else {
        gelu = 0.5f * g * (1.f + std::erf(g * 0.7071067811865476f));
      }
      out[static_cast<size_t>(r) * d + c] = round_to(DType::kF16, x * gelu);
    }
  }
}

void group_norm(const float* x, const float* gamma, const float* beta, float* y, int N, int C,
                int HW, int G, float eps, int apply_silu) {
  const int cpg = C / G;
  const size_t count = static_cast<size_t>(cpg) * HW;
  for (int n = 0; n < N; ++n) {
    for (int g = 0; g < G; ++g) {
      const size_t base = (static_cast<size_t>(n) * C + static_cast<size_t>(g) * cpg) * HW;
      double sum = 0;
      for (size_t i = 0; i < count; ++i) sum += x[base + i];
      const double mean = sum / static_cast<double>(count);
      double sq = 0;
      for (size_t i = 0; i < count; ++i) sq += (x[base + i] - mean) * (x[base + i] - mean);
      const float rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(count) + eps));
      const float meanf = static_cast<float>(mean);
      for (size_t i = 0; i < count; ++i) {
        const int c = g * cpg + static_cast<int>(i / HW);
        float a = (x[base + i] - meanf) * (gamma[c] * rstd) + beta[c];
        if (apply_silu) a = a / (1.f + std::exp(-a));
        y[base + i] = round_to(DType::kF16, a);
      }
    }
  }
}

void rms_norm(DType type, const float* x, const float* w, float* y, int rows, int cols, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * cols;
    double sq = 0;
    for (int c = 0; c < cols; ++c) sq += static_cast<double>(xr[c]) * xr[c];
    const float rstd = static_cast<float>(1.0 / std::sqrt(sq / cols + eps));
    for (int c = 0; c < cols; ++c)
      y[static_cast<size_t>(r) * cols + c] = round_to(type, xr[c] * rstd * w[c]);
  }
}

void layer_norm(DType type, const float* x, const float* gamma, const float* beta, float* y,
                int rows, int cols, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * cols;
    double sum = 0;
    for (int c = 0; c < cols; ++c) sum += xr[c];
    const double mean = sum / cols;
    double sq = 0;
    for (int c = 0; c < cols; ++c) sq += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(sq / cols + eps));
    const float meanf = static_cast<float>(mean);
    for (int c = 0; c < cols; ++c)
      y[static_cast<size_t>(r) * cols + c] =
          round_to(type, (xr[c] - meanf) * rstd * gamma[c] + beta[c]);
  }
}

void softmax(DType type, const float* x, float* y, int rows, int cols, float scale) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * cols;
    float* yr = y + static_cast<size_t>(r) * cols;
    double m = ninf;
    for (int c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(scale * xr[c]));
    double s = 0;
    for (int c = 0; c < cols; ++c)
      if (scale * xr[c] != ninf) s += std::exp(scale * xr[c] - m);
    for (int c = 0; c < cols; ++c) {
      const float v = scale * xr[c];
      yr[c] = (v == ninf || s == 0) ? 0.f : round_to(type, static_cast<float>(std::exp(v - m) / s));
    }
  }
}

void attention(const float* q, const float* k, const float* v, float* o, int batch_heads, int lq,
               int lk, float scale, int causal, bool accum_half) {
  constexpr int D = kAttentionHeadDim;
  const float qscale = scale * 1.4426950408889634f;  // log2 domain, as the kernel
  for (int b = 0; b < batch_heads; ++b) {
    const float* kb = k + static_cast<size_t>(b) * lk * D;
    const float* vb = v + static_cast<size_t>(b) * lk * D;
    for (int i = 0; i < lq; ++i) {
      const float* qi = q + (static_cast<size_t>(b) * lq + i) * D;
      float* oi = o + (static_cast<size_t>(b) * lq + i) * D;
      const int kmax = causal ? std::min(lk, std::max(0, i + lk - lq + 1)) : lk;
      if (kmax == 0) {
        std::fill(oi, oi + D, 0.f);
        continue;
      }
      if (!accum_half) {
        std::vector<double> s(kmax);
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < kmax; ++j) {
          double d = 0;
          for (int c = 0; c < D; ++c)
            d += static_cast<double>(qi[c]) * kb[static_cast<size_t>(j) * D + c];
          s[j] = d * scale;
          m = std::max(m, s[j]);
        }
        double l = 0;
        std::vector<double> acc(D, 0.0);
        for (int j = 0; j < kmax; ++j) {
          const double p = std::exp(s[j] - m);
          l += p;
          for (int c = 0; c < D; ++c) acc[c] += p * vb[static_cast<size_t>(j) * D + c];
        }
        for (int c = 0; c < D; ++c) oi[c] = round_to(DType::kF16, static_cast<float>(acc[c] / l));
        continue;
      }
      // fp16 accumulation, in the kernel's order: each of two threads owns 32 dims and keeps a
      // half2 (even dims, odd dims) partial dot product.
      float qh[D];
      for (int c = 0; c < D; ++c) qh[c] = round_to(DType::kF16, qi[c] * qscale);
      float acc[D] = {};
      float m = -std::numeric_limits<float>::infinity(), l = 0.f;
      for (int j = 0; j < kmax; ++j) {
        const float* kj = kb + static_cast<size_t>(j) * D;
        float part[2][2] = {};  // [thread][lane]
        for (int t = 0; t < 2; ++t)
          for (int c = 0; c < D / 2; ++c) {
            const int dim = t * (D / 2) + c;
            float& p = part[t][c & 1];
            p = h(static_cast<double>(qh[dim]) * kj[dim] + p);
          }
        const float sx = h(static_cast<double>(part[0][0]) + part[1][0]);
        const float sy = h(static_cast<double>(part[0][1]) + part[1][1]);
        const float s = sx + sy;
        if (s > m) {
          const float corr = std::exp2(m - s);
          l *= corr;
          const float corr_h = round_to(DType::kF16, corr);
          for (int c = 0; c < D; ++c) acc[c] = h(static_cast<double>(acc[c]) * corr_h);
          m = s;
        }
        const float p = std::exp2(s - m);
        l += p;
        const float p_h = round_to(DType::kF16, p);
        for (int c = 0; c < D; ++c)
          acc[c] = h(static_cast<double>(p_h) * vb[static_cast<size_t>(j) * D + c] + acc[c]);
      }
      const float inv = l > 0.f ? 1.f / l : 0.f;
      for (int c = 0; c < D; ++c) oi[c] = round_to(DType::kF16, acc[c] * inv);
    }
  }
}

void rotary_embedding(DType type, const int32_t* positions, float* q, float* k, int tokens,
                      int heads_q, int heads_k, int head_dim, int rot_dim, float base) {
  const int half_rot = rot_dim / 2;
  for (int t = 0; t < tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    const int nk = k ? heads_k : 0;
    for (int hh = 0; hh < heads_q + nk; ++hh) {
      float* head = hh < heads_q
                        ? q + (static_cast<size_t>(t) * heads_q + hh) * head_dim
                        : k + (static_cast<size_t>(t) * heads_k + (hh - heads_q)) * head_dim;
      for (int i = 0; i < half_rot; ++i) {
        const float inv_freq =
            std::pow(base, -static_cast<float>(2 * i) / static_cast<float>(rot_dim));
        const double a = pos * inv_freq;
        const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
        const float x0 = head[i], x1 = head[i + half_rot];
        head[i] = round_to(type, x0 * c - x1 * s);
        head[i + half_rot] = round_to(type, x1 * c + x0 * s);
      }
    }
  }
}

void linear_bf16(const float* x, const float* w, const float* bias, float* y, int M, int N, int K) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int kk = 0; kk < K; ++kk)
        acc += static_cast<double>(x[static_cast<size_t>(m) * K + kk]) *
               w[static_cast<size_t>(n) * K + kk];
      const float v = static_cast<float>(acc) + (bias ? bias[n] : 0.f);
      y[static_cast<size_t>(m) * N + n] = round_to(DType::kBF16, v);
    }
}

void fp8_amax(const float* x, float* amax, int n) {
  float m = amax[0];
  for (int i = 0; i < n; ++i)
    if (!std::isnan(x[i])) m = std::max(m, std::fabs(x[i]));
  amax[0] = m;
}

void fp8_quantize_e4m3(const float* x, uint8_t* q, const float* scale, int n) {
  const float inv = 1.f / scale[0];
  for (int i = 0; i < n; ++i) q[i] = float_to_e4m3(x[i] * inv);
}

void fp8_dequantize_e4m3(const uint8_t* q, float* y, const float* scale, int n) {
  for (int i = 0; i < n; ++i) y[i] = round_to(DType::kF16, e4m3_to_float(q[i]) * scale[0]);
}

void fp8_gemv_e4m3(const uint8_t* w, const float* x, float* y, const float* w_scale, int N, int K) {
  for (int n = 0; n < N; ++n) {
    double acc = 0;
    for (int kk = 0; kk < K; ++kk)
      acc += static_cast<double>(e4m3_to_float(w[static_cast<size_t>(n) * K + kk])) * x[kk];
    y[n] = round_to(DType::kF16, static_cast<float>(acc) * w_scale[0]);
  }
}

void moe_topk_softmax(const float* logits, float* topk_weights, int32_t* topk_ids, int tokens,
                      int num_experts, int k, int renormalize) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<int> order(num_experts);
  for (int t = 0; t < tokens; ++t) {
    const float* row = logits + static_cast<size_t>(t) * num_experts;
    float m = ninf;
    for (int e = 0; e < num_experts; ++e) m = std::max(m, row[e]);
    if (m == ninf) m = 0.f;
    double total = 0;
    for (int e = 0; e < num_experts; ++e) total += std::exp(static_cast<double>(row[e]) - m);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    const int kk = std::min(k, num_experts);
    double denom = total;
    if (renormalize) {
      denom = 0;
      for (int r = 0; r < kk; ++r) denom += std::exp(static_cast<double>(row[order[r]]) - m);
    }
    for (int r = 0; r < kk; ++r) {
      const double p = std::exp(static_cast<double>(row[order[r]]) - m);
      topk_weights[static_cast<size_t>(t) * k + r] =
          denom > 0 ? static_cast<float>(p / denom) : 0.f;
      topk_ids[static_cast<size_t>(t) * k + r] = order[r];
    }
  }
}

void moe_align(const int32_t* topk_ids, int numel, int num_experts, int align, int capacity,
               int32_t* expert_offsets, int32_t* sorted_ids, int32_t* block_expert_ids) {
  std::vector<int> count(num_experts, 0);
  for (int i = 0; i < numel; ++i)
    if (topk_ids[i] >= 0 && topk_ids[i] < num_experts) ++count[topk_ids[i]];
  std::vector<int> offset(num_experts + 1, 0);
  for (int e = 0; e < num_experts; ++e)
    offset[e + 1] = offset[e] + (count[e] + align - 1) / align * align;
  const int total = offset[num_experts];
  std::copy(offset.begin(), offset.end(), expert_offsets);
  for (int j = 0; j < std::min(total, capacity); ++j) sorted_ids[j] = numel;
  for (int e = 0; e < num_experts; ++e)
    for (int b = offset[e] / align; b < offset[e + 1] / align; ++b)
      if (static_cast<long long>(b) * align < capacity) block_expert_ids[b] = e;
  std::vector<int> cursor(num_experts, 0);
  for (int i = 0; i < numel; ++i) {
    const int e = topk_ids[i];
    if (e < 0 || e >= num_experts) continue;
    const int pos = offset[e] + cursor[e]++;
    if (pos < capacity) sorted_ids[pos] = i;
  }
}

void top_k_top_p_sample(const float* logits, const float* uniform, int32_t* sampled, int rows,
                        int n, float temperature, int top_k, float top_p) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const bool greedy = !(temperature > 0.f);
  const float inv_t = greedy ? 1.f : 1.f / temperature;
  const int kk = (top_k <= 0 || top_k > n) ? n : top_k;
  std::vector<float> x(n);
  std::vector<int> order(n);
  std::vector<double> p(n);
  for (int row = 0; row < rows; ++row) {
    for (int e = 0; e < n; ++e) x[e] = logits[static_cast<size_t>(row) * n + e] * inv_t;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
    if (greedy || n == 0) {
      sampled[row] = n ? order[0] : 0;
      continue;
    }
    const double m = x[order[0]];
    double mass = 0;
    for (int r = 0; r < n; ++r) {
      p[r] = (r < kk && x[order[r]] != ninf) ? std::exp(x[order[r]] - m) : 0.0;
      mass += p[r];
    }
    double before = 0;  // top-p cut: keep while the mass before the rank is below top_p
    int kept = 0;
    for (int r = 0; r < n; ++r) {
      const double pr = p[r];
      if (r > 0 && !(before < static_cast<double>(top_p) * mass)) p[r] = 0;
      if (r < kk && (r == 0 || p[r] > 0)) kept = r + 1;
      before += pr;
    }
    double kept_mass = 0;
    for (int r = 0; r < n; ++r) kept_mass += p[r];
    const double target = uniform[row] * kept_mass;
    int pick = -1;
    double cum = 0;
    for (int r = 0; r < n && pick < 0; ++r) {
      if (p[r] > 0 && target < cum + p[r]) pick = r;
      cum += p[r];
    }
    sampled[row] = order[pick >= 0 ? pick : kept - 1];
  }
}

}  // namespace kcache::reference
