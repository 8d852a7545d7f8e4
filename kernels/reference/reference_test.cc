// Invariants of the CPU references (reference.h) and consistency of the launch table (launch.h).
#include "kernels/reference/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/reference/launch.h"

namespace kcache::reference {
namespace {

std::vector<float> Random(size_t n, float lo, float hi, DType type, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(type, dist(rng));
  return v;
}

// ---- scalar formats -----------------------------------------------------------------------

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie to even
  EXPECT_EQ(float_to_half(0.1f), 0x2e66);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}

TEST(HalfConversion, RoundTripsEveryFiniteHalf) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    if ((bits & 0x7c00) == 0x7c00) continue;
    EXPECT_EQ(float_to_half(half_to_float(bits)), bits) << std::hex << b;
  }
}

TEST(Bf16Conversion, KnownValuesAndRoundTrip) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-1.0f), 0xbf80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    if ((bits & 0x7f80) == 0x7f80) continue;
    EXPECT_EQ(float_to_bf16(bf16_to_float(bits)), bits) << std::hex << b;
  }
}

TEST(E4m3Conversion, KnownValues) {
  EXPECT_EQ(float_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7e);  // midpoint to the NaN code: saturates
  EXPECT_EQ(float_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie to even
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.5f, -10)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -6)), 0x08);  // smallest normal
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);               // tie to even
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3a);               // tie to even (up)
  EXPECT_EQ(float_to_e4m3(std::nanf("")), 0x7f);
  EXPECT_FLOAT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_FLOAT_EQ(e4m3_to_float(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
}

TEST(E4m3Conversion, RoundTripsEveryCodeAndRoundsToNearest) {
  std::vector<float> values;
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(b))), b) << b;
    values.push_back(e4m3_to_float(static_cast<uint8_t>(b)));
  }
  std::sort(values.begin(), values.end());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-450.f, 450.f);
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng);
    const float q = e4m3_to_float(float_to_e4m3(x));
    float best = std::numeric_limits<float>::infinity();
    for (float v : values) best = std::min(best, std::fabs(v - x));
    EXPECT_EQ(std::fabs(q - x), best) << x;
  }
}

// ---- kernels ------------------------------------------------------------------------------

TEST(TimestepEmbedding, ZeroTimestepAndFlipAndOddPad) {
  const int dim = 9;  // half = 4, last column padded
  const float t[2] = {0.f, 3.f};
  std::vector<float> out(2 * dim), flipped(2 * dim);
  timestep_embedding(DType::kF32, t, out.data(), 2, dim, 10000.f, 1.f, 1.f, 0);
  timestep_embedding(DType::kF32, t, flipped.data(), 2, dim, 10000.f, 1.f, 1.f, 1);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(out[j], 0.f);      // sin(0)
    EXPECT_EQ(out[4 + j], 1.f);  // cos(0)
    EXPECT_EQ(flipped[dim + j], out[dim + 4 + j]);
    EXPECT_EQ(flipped[dim + 4 + j], out[dim + j]);
  }
  EXPECT_EQ(out[dim - 1], 0.f);
  EXPECT_EQ(out[2 * dim - 1], 0.f);
  EXPECT_NEAR(out[dim], std::sin(3.0), 1e-6);  // column 0 has frequency 1
  EXPECT_NEAR(out[dim + 4], std::cos(3.0), 1e-6);
  for (int j = 0; j < 4; ++j)  // sin^2 + cos^2 = 1
    EXPECT_NEAR(out[dim + j] * out[dim + j] + out[dim + 4 + j] * out[dim + 4 + j], 1.0, 1e-6);
}

TEST(TimestepEmbedding, OutputIsRoundedToElementType) {
  const float t[1] = {123.f};
  std::vector<float> out(64);
  timestep_embedding(DType::kBF16, t, out.data(), 1, 64, 10000.f, 0.f, 1.f, 0);
  for (float v : out) EXPECT_EQ(v, round_to(DType::kBF16, v));
}

TEST(Geglu, GatesTheValue) {
  const int d = 4;
  const float in[2 * d] = {1.f, -2.f, 3.f, 0.5f, /*gate*/ 0.f, 20.f, -20.f, 1.f};
  float out[d], out_tanh[d];
  geglu(in, out, 1, d, false);
  geglu(in, out_tanh, 1, d, true);
  EXPECT_EQ(out[0], 0.f);                        // gelu(0) = 0
  EXPECT_EQ(out[1], -2.f * 20.f);                // gelu(g) = g for large g
  EXPECT_EQ(out[2], 0.f);                        // gelu(g) -> 0 for very negative g
  EXPECT_NEAR(out[3], 0.5f * 0.8413447f, 1e-3);  // gelu(1) = Phi(1)
  EXPECT_NEAR(out_tanh[3], 0.5f * 0.8411920f, 1e-3);
}

TEST(GroupNorm, GroupsAreStandardised) {
  const int N = 2, C = 6, HW = 10, G = 3;
  auto x = Random(N * C * HW, -3.f, 5.f, DType::kF16, 1);
  std::vector<float> gamma(C, 1.f), beta(C, 0.f), y(x.size());
  group_norm(x.data(), gamma.data(), beta.data(), y.data(), N, C, HW, G, 1e-6f, 0);
  const int count = C / G * HW;
  for (int grp = 0; grp < N * G; ++grp) {
    double s = 0, sq = 0;
    for (int i = 0; i < count; ++i) s += y[grp * count + i];
    for (int i = 0; i < count; ++i)
      sq += (y[grp * count + i] - s / count) * (y[grp * count + i] - s / count);
    EXPECT_NEAR(s / count, 0.0, 2e-3);
    EXPECT_NEAR(sq / count, 1.0, 4e-3);
  }
}

TEST(GroupNorm, AffineAndSilu) {
  const int C = 2, HW = 4, G = 1;
  const float x[C * HW] = {1, 2, 3, 4, 5, 6, 7, 8};
  const float gamma[C] = {2.f, 0.f}, beta[C] = {0.f, 1.5f};
  float y[C * HW], ys[C * HW];
  group_norm(x, gamma, beta, y, 1, C, HW, G, 0.f, 0);
  group_norm(x, gamma, beta, ys, 1, C, HW, G, 0.f, 1);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(y[i], 1.5f);  // gamma 0: beta only
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(ys[i], y[i] / (1.f + std::exp(-y[i])), 2e-3 * (1 + std::fabs(y[i])));
}

TEST(RmsNorm, UnitWeightGivesUnitRms) {
  const int rows = 3, cols = 257;
  for (DType t : {DType::kF16, DType::kBF16}) {
    auto x = Random(rows * cols, -4.f, 4.f, t, 2);
    std::vector<float> w(cols, 1.f), y(x.size());
    rms_norm(t, x.data(), w.data(), y.data(), rows, cols, 0.f);
    for (int r = 0; r < rows; ++r) {
      double sq = 0;
      for (int c = 0; c < cols; ++c) sq += y[r * cols + c] * y[r * cols + c];
      EXPECT_NEAR(std::sqrt(sq / cols), 1.0, t == DType::kF16 ? 1e-3 : 8e-3);
    }
  }
}

TEST(LayerNorm, ZeroMeanUnitVariance) {
  const int rows = 4, cols = 300;
  auto x = Random(rows * cols, -1.f, 3.f, DType::kF16, 3);
  std::vector<float> g(cols, 1.f), b(cols, 0.f), y(x.size());
  layer_norm(DType::kF16, x.data(), g.data(), b.data(), y.data(), rows, cols, 0.f);
  for (int r = 0; r < rows; ++r) {
    double s = 0, sq = 0;
    for (int c = 0; c < cols; ++c) s += y[r * cols + c];
    for (int c = 0; c < cols; ++c) sq += y[r * cols + c] * y[r * cols + c];
    EXPECT_NEAR(s / cols, 0.0, 1e-3);
    EXPECT_NEAR(sq / cols, 1.0, 2e-3);
  }
}

TEST(Softmax, RowsSumToOneAndShiftInvariant) {
  const int rows = 5, cols = 77;
  auto x = Random(rows * cols, -30.f, 30.f, DType::kF32, 4);
  std::vector<float> y(x.size()), shifted(x.size()), ys(x.size());
  for (size_t i = 0; i < x.size(); ++i) shifted[i] = x[i] + 1000.f;
  softmax(DType::kF32, x.data(), y.data(), rows, cols, 0.7f);
  softmax(DType::kF32, shifted.data(), ys.data(), rows, cols, 0.7f);
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < cols; ++c) {
      EXPECT_GE(y[r * cols + c], 0.f);
      s += y[r * cols + c];
      EXPECT_NEAR(y[r * cols + c], ys[r * cols + c], 1e-3);  // shifted inputs lose low bits
    }
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
}

TEST(Softmax, NegativeInfinityIsMaskedOut) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const float x[2 * 3] = {ninf, 0.f, 0.f, ninf, ninf, ninf};
  float y[6];
  softmax(DType::kF16, x, y, 2, 3, 1.f);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], 0.5f);
  for (int i = 3; i < 6; ++i) EXPECT_EQ(y[i], 0.f);  // fully masked row: zeros
}

TEST(Attention, SingleKeyReturnsItsValue) {
  constexpr int D = kAttentionHeadDim;
  auto q = Random(2 * 3 * D, -1.f, 1.f, DType::kF16, 5);
  auto k = Random(2 * 1 * D, -1.f, 1.f, DType::kF16, 6);
  auto v = Random(2 * 1 * D, -1.f, 1.f, DType::kF16, 7);
  for (bool half : {false, true}) {
    std::vector<float> o(q.size());
    attention(q.data(), k.data(), v.data(), o.data(), 2, 3, 1, 0.125f, 0, half);
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 3; ++i)
        for (int c = 0; c < D; ++c) EXPECT_EQ(o[(b * 3 + i) * D + c], v[b * D + c]);
  }
}

TEST(Attention, CausalMaskIsBottomRightAligned) {
  constexpr int D = kAttentionHeadDim;
  const int lq = 2, lk = 4;  // query i sees keys j <= i + 2
  auto q = Random(lq * D, -1.f, 1.f, DType::kF16, 8);
  auto k = Random(lk * D, -1.f, 1.f, DType::kF16, 9);
  auto v = Random(lk * D, -1.f, 1.f, DType::kF16, 10);
  std::vector<float> o(lq * D), o3(D);
  attention(q.data(), k.data(), v.data(), o.data(), 1, lq, lk, 0.125f, 1, false);
  // Query 0 equals unmasked attention over the first three keys.
  attention(q.data(), k.data(), v.data(), o3.data(), 1, 1, 3, 0.125f, 0, false);
  for (int c = 0; c < D; ++c) EXPECT_EQ(o[c], o3[c]);
  // lq > lk: the first queries see no key and produce zeros.
  std::vector<float> o_big(5 * D);
  auto q5 = Random(5 * D, -1.f, 1.f, DType::kF16, 11);
  attention(q5.data(), k.data(), v.data(), o_big.data(), 1, 5, 4, 0.125f, 1, false);
  for (int c = 0; c < D; ++c) EXPECT_EQ(o_big[c], 0.f);
}

TEST(Attention, Fp16AccumulationStaysCloseToFp32) {
  constexpr int D = kAttentionHeadDim;
  const int bh = 2, lq = 9, lk = 150;
  auto q = Random(bh * lq * D, -1.f, 1.f, DType::kF16, 12);
  auto k = Random(bh * lk * D, -1.f, 1.f, DType::kF16, 13);
  auto v = Random(bh * lk * D, -1.f, 1.f, DType::kF16, 14);
  std::vector<float> o32(q.size()), o16(q.size());
  attention(q.data(), k.data(), v.data(), o32.data(), bh, lq, lk, 0.125f, 1, false);
  attention(q.data(), k.data(), v.data(), o16.data(), bh, lq, lk, 0.125f, 1, true);
  for (size_t i = 0; i < o32.size(); ++i) EXPECT_NEAR(o16[i], o32[i], 1e-2);
}

TEST(RotaryEmbedding, PositionZeroIsIdentityAndNormsArePreserved) {
  const int tokens = 2, hq = 2, hk = 1, hd = 8, rot = 4;
  const int32_t pos[tokens] = {0, 17};
  auto q = Random(tokens * hq * hd, -1.f, 1.f, DType::kF32, 15);
  auto k = Random(tokens * hk * hd, -1.f, 1.f, DType::kF32, 16);
  auto q0 = q, k0 = k;
  rotary_embedding(DType::kF32, pos, q.data(), k.data(), tokens, hq, hk, hd, rot, 10000.f);
  for (int i = 0; i < hq * hd; ++i) EXPECT_FLOAT_EQ(q[i], q0[i]);  // token 0
  for (int h = 0; h < hq; ++h) {
    const float* a = &q[(hq + h) * hd];
    const float* b = &q0[(hq + h) * hd];
    for (int i = 0; i < rot / 2; ++i)
      EXPECT_NEAR(a[i] * a[i] + a[i + rot / 2] * a[i + rot / 2],
                  b[i] * b[i] + b[i + rot / 2] * b[i + rot / 2], 1e-5);
    for (int i = rot; i < hd; ++i) EXPECT_EQ(a[i], b[i]);  // past rot_dim: untouched
  }
  // Pair 0 of token 1 rotates by exactly 17 radians.
  EXPECT_NEAR(k[hd], k0[hd] * std::cos(17.0) - k0[hd + 2] * std::sin(17.0), 1e-5);
}

TEST(LinearBf16, IdentityWeightAndBias) {
  const int M = 3, N = 4, K = 4;
  auto x = Random(M * K, -2.f, 2.f, DType::kBF16, 17);
  std::vector<float> w(N * K, 0.f), bias = {0.5f, -1.f, 0.f, 2.f}, y(M * N);
  for (int i = 0; i < N; ++i) w[i * K + i] = 1.f;
  linear_bf16(x.data(), w.data(), nullptr, y.data(), M, N, K);
  EXPECT_EQ(y, x);
  linear_bf16(x.data(), w.data(), bias.data(), y.data(), M, N, K);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n)
      EXPECT_EQ(y[m * N + n], round_to(DType::kBF16, x[m * K + n] + bias[n]));
}

TEST(Fp8, QuantizeDequantizeRoundTripWithinE4m3Precision) {
  const int n = 4097;
  auto x = Random(n, -50.f, 50.f, DType::kF16, 18);
  float amax = 0.f;
  fp8_amax(x.data(), &amax, n);
  float expect = 0.f;
  for (float v : x) expect = std::max(expect, std::fabs(v));
  EXPECT_EQ(amax, expect);
  const float scale = amax / 448.f;
  std::vector<uint8_t> q(n);
  std::vector<float> y(n);
  fp8_quantize_e4m3(x.data(), q.data(), &scale, n);
  fp8_dequantize_e4m3(q.data(), y.data(), &scale, n);
  for (int i = 0; i < n; ++i) {
    EXPECT_NE(q[i] & 0x7f, 0x7f);  // never NaN
    // Normal range: relative error <= 2^-4 (half an ulp of a 3-bit mantissa), plus fp16
    // rounding; subnormal range: absolute error <= half the subnormal step.
    const float tol = std::max(std::fabs(x[i]) * (0.0625f + 1e-3f), scale * std::ldexp(1.f, -10));
    EXPECT_LE(std::fabs(y[i] - x[i]), tol) << x[i];
  }
}

TEST(Fp8, QuantizeSaturates) {
  const float x[3] = {1000.f, -1000.f, 0.f};
  const float scale = 1.f;
  uint8_t q[3];
  fp8_quantize_e4m3(x, q, &scale, 3);
  EXPECT_EQ(q[0], 0x7e);
  EXPECT_EQ(q[1], 0xfe);
  EXPECT_EQ(q[2], 0x00);
}

TEST(Fp8, GemvMatchesDequantizedDot) {
  const int N = 5, K = 33;
  std::mt19937 rng(19);
  std::vector<uint8_t> w(N * K);
  for (auto& b : w) {
    do b = static_cast<uint8_t>(rng());
    while ((b & 0x7f) == 0x7f);
  }
  auto x = Random(K, -1.f, 1.f, DType::kF16, 20);
  const float s = 1.f / 448.f;
  std::vector<float> y(N);
  fp8_gemv_e4m3(w.data(), x.data(), y.data(), &s, N, K);
  for (int n = 0; n < N; ++n) {
    double acc = 0;
    for (int k = 0; k < K; ++k) acc += e4m3_to_float(w[n * K + k]) * s * x[k];
    EXPECT_NEAR(y[n], acc, 1e-3 * (1 + std::fabs(acc)));
  }
}

TEST(MoeTopkSoftmax, SelectsLargestWithLowerIdOnTies) {
  const int E = 6, k = 3;
  const float logits[2 * E] = {0.f,  2.f,  1.f,  2.f,  -1.f, 0.5f,  // tie between 1 and 3
                               -4.f, -3.f, -2.f, -1.f, 0.f,  1.f};
  float w[2 * k], wn[2 * k];
  int32_t ids[2 * k], idsn[2 * k];
  moe_topk_softmax(logits, w, ids, 2, E, k, 0);
  moe_topk_softmax(logits, wn, idsn, 2, E, k, 1);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + k), (std::vector<int32_t>{1, 3, 2}));
  EXPECT_EQ(std::vector<int32_t>(ids + k, ids + 2 * k), (std::vector<int32_t>{5, 4, 3}));
  for (int t = 0; t < 2; ++t) {
    double all = 0;
    for (int e = 0; e < E; ++e) all += std::exp(logits[t * E + e]);
    double sel = 0;
    for (int r = 0; r < k; ++r) {
      EXPECT_NEAR(w[t * k + r], std::exp(logits[t * E + ids[t * k + r]]) / all, 1e-6);
      if (r > 0) {
        EXPECT_LE(w[t * k + r], w[t * k + r - 1]);
      }
      sel += wn[t * k + r];
      EXPECT_EQ(idsn[t * k + r], ids[t * k + r]);
    }
    EXPECT_NEAR(sel, 1.0, 1e-6);
  }
}

TEST(MoeAlign, SegmentsArePaddedAndHoldEveryEntryOnce) {
  const int numel = 50, E = 7, align = 4;
  const int capacity = numel + E * (align - 1);
  std::mt19937 rng(21);
  std::vector<int32_t> ids(numel);
  for (auto& i : ids) i = static_cast<int32_t>(rng() % (E + 1)) - (rng() % 10 == 0 ? E + 1 : 0);
  std::vector<int32_t> offsets(E + 1), sorted(capacity, -1), blocks(capacity, -1);
  moe_align(ids.data(), numel, E, align, capacity, offsets.data(), sorted.data(), blocks.data());
  EXPECT_EQ(offsets[0], 0);
  std::set<int> seen;
  for (int e = 0; e < E; ++e) {
    EXPECT_EQ(offsets[e] % align, 0);
    int prev = -1, real = 0;
    for (int j = offsets[e]; j < offsets[e + 1]; ++j) {
      EXPECT_EQ(blocks[j / align], e);
      if (sorted[j] == numel) continue;  // padding
      EXPECT_EQ(ids[sorted[j]], e);
      EXPECT_GT(sorted[j], prev);  // ascending within an expert
      prev = sorted[j];
      ++real;
      EXPECT_TRUE(seen.insert(sorted[j]).second);
    }
    EXPECT_LT(offsets[e + 1] - offsets[e] - real, align);
  }
  int valid = 0;
  for (int32_t e : ids) valid += (e >= 0 && e < E);
  EXPECT_EQ(static_cast<int>(seen.size()), valid);
  EXPECT_LE(offsets[E], capacity);
}

TEST(TopKTopPSample, GreedyAndTopKOnePickTheLargestLogit) {
  const int n = 5;
  const float logits[n] = {0.5f, 3.f, -1.f, 3.f, 2.f};  // tie between 1 and 3
  for (float u : {0.f, 0.3f, 0.999f}) {
    int32_t s = -1;
    top_k_top_p_sample(logits, &u, &s, 1, n, 0.f, 0, 1.f);  // temperature 0: greedy
    EXPECT_EQ(s, 1);
    top_k_top_p_sample(logits, &u, &s, 1, n, 1.f, 1, 1.f);  // top_k 1
    EXPECT_EQ(s, 1);
    top_k_top_p_sample(logits, &u, &s, 1, n, 1.f, 0, 0.f);  // top_p 0 keeps rank 0 only
    EXPECT_EQ(s, 1);
  }
}

TEST(TopKTopPSample, DrawsFollowTheSoftmax) {
  const float logits[3] = {0.f, std::log(2.f), std::log(3.f)};  // p = 1/6, 2/6, 3/6
  const int draws = 6000;
  int count[3] = {};
  for (int i = 0; i < draws; ++i) {
    const float u = (i + 0.5f) / draws;
    int32_t s = -1;
    top_k_top_p_sample(logits, &u, &s, 1, 3, 1.f, 0, 1.f);
    ASSERT_TRUE(s >= 0 && s < 3);
    ++count[s];
  }
  EXPECT_NEAR(count[0], 1000, 2);
  EXPECT_NEAR(count[1], 2000, 2);
  EXPECT_NEAR(count[2], 3000, 2);
  EXPECT_EQ(count[0] + count[1] + count[2], draws);
}

TEST(TopKTopPSample, TopPAndTopKCutTheTail) {
  // Sorted probabilities 0.5, 0.3, 0.2 (ids 2, 0, 1).
  const float logits[3] = {std::log(0.3f), std::log(0.2f), std::log(0.5f)};
  const float high = 0.999f, low = 0.f;
  int32_t s = -1;
  top_k_top_p_sample(logits, &high, &s, 1, 3, 1.f, 0, 0.6f);  // keeps ranks 0, 1
  EXPECT_EQ(s, 0);
  top_k_top_p_sample(logits, &high, &s, 1, 3, 1.f, 0, 1.f);  // keeps all
  EXPECT_EQ(s, 1);
  top_k_top_p_sample(logits, &high, &s, 1, 3, 1.f, 2, 1.f);  // top_k 2
  EXPECT_EQ(s, 0);
  top_k_top_p_sample(logits, &low, &s, 1, 3, 1.f, 0, 1.f);  // u = 0: rank 0
  EXPECT_EQ(s, 2);
  // Masked (-inf) candidates are never drawn.
  const float masked[3] = {-std::numeric_limits<float>::infinity(), 1.f,
                           -std::numeric_limits<float>::infinity()};
  top_k_top_p_sample(masked, &high, &s, 1, 3, 1.f, 0, 1.f);
  EXPECT_EQ(s, 1);
}

// ---- launch table -------------------------------------------------------------------------

TEST(LaunchTable, EntriesAreWellFormed) {
  using namespace launch;
  std::set<std::string> keys;
  for (const EntryPoint& ep : kEntryPoints) {
    EXPECT_TRUE(keys.insert(std::string(ep.kernel) + "/" + ep.symbol).second) << ep.symbol;
    EXPECT_GE(ep.min_sm, 75);
    EXPECT_GT(ep.num_params, 0u);
    EXPECT_TRUE(ep.block[0] % 32 == 0 && ep.block[0] <= 1024) << ep.symbol;
    std::set<std::string> scalars, names;
    for (size_t i = 0; i < ep.num_params; ++i) {
      EXPECT_TRUE(names.insert(ep.params[i].name).second) << ep.symbol << " " << ep.params[i].name;
      if (ep.params[i].arg == Arg::kInt32) scalars.insert(ep.params[i].name);
    }
    auto arg = [&](const char* n) -> int64_t {
      EXPECT_TRUE(scalars.count(n)) << ep.symbol << ": unknown argument " << n;
      for (size_t i = 0; i < ep.num_params; ++i)
        if (std::strcmp(ep.params[i].name, n) == 0)
          return static_cast<int64_t>(ep.params[i].example);
      return 0;
    };
    for (const Expr& g : ep.grid) EXPECT_GE(Eval(g, arg), 1) << ep.symbol;
    for (size_t i = 0; i < ep.num_params; ++i) {
      const Param& p = ep.params[i];
      if (p.arg != Arg::kPointer) continue;
      EXPECT_GE(Eval(p.length, arg), 1) << ep.symbol << " " << p.name;
      if (p.init.hi_arg) arg(p.init.hi_arg);
    }
  }
  EXPECT_EQ(kNumEntryPoints, 31u);
}

TEST(LaunchTable, ExprEvaluation) {
  using namespace launch;
  auto arg = [](const char* n) -> int64_t { return std::string(n) == "a" ? 1000 : 3; };
  EXPECT_EQ(Eval(Const(1), arg), 1);
  EXPECT_EQ(Eval(Of("a", "b", nullptr, 2), arg), 6000);
  EXPECT_EQ(Eval(CeilDiv(Of("a"), 64), arg), 16);
  EXPECT_EQ(Eval(Cap(CeilDiv(Of("a", "a"), 2), 100), arg), 100);
  EXPECT_EQ(Eval(Plus(Of("b"), 1), arg), 4);
}

}  // namespace
}  // namespace kcache::reference
