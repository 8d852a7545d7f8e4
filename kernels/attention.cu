// Tiled scaled-dot-product attention, head dim 64, fp16 in/out (flash-style online softmax).
//   q, o: [BH, Lq, 64]; k, v: [BH, Lk, 64] (contiguous, 16-byte aligned).
//   o[i] = sum_j softmax_j(scale * q[i].k[j]) v[j]
//   causal != 0: key j is visible to query i iff j <= i + (Lk - Lq) (bottom-right aligned);
//   a query with no visible key gets zeros.
// Two threads per query row, each owning 32 of the 64 dims (partial dot products are joined
// with a shuffle). K/V tiles of 64 keys are staged in shared memory and read as broadcasts.
// Keys are folded in one at a time (online softmax); the accumulator is rescaled only when the
// running max grows.
// Default: fp32 scores and accumulator. -DKCACHE_ATTN_ACCUM_HALF=1: q.k and p.v are accumulated
// in fp16 (HFMA2); the softmax max/sum stay fp32. Faster, less accurate (the unnormalised
// accumulator, up to Lk * max|v|, must stay below 65504).
// Launch: grid = (ceil(Lq / 64), BH), block = 128, static shared memory 16 KiB.
#include "common.cuh"

#ifndef KCACHE_ATTN_ACCUM_HALF
#define KCACHE_ATTN_ACCUM_HALF 0
#endif

namespace {
constexpr int kD = 64;             // head dim
constexpr int kDT = kD / 2;        // dims per thread
constexpr int kBQ = 64;            // queries per block
constexpr int kThreads = 2 * kBQ;  // two threads per query
constexpr int kBK = 64;            // keys per shared-memory tile
constexpr float kLog2e = 1.4426950408889634f;
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    attention_f16_d64(const __half* __restrict__ q, const __half* __restrict__ k,
                      const __half* __restrict__ v, __half* __restrict__ o, int batch_heads,
                      int lq, int lk, float scale, int causal) {
  __shared__ __align__(16) __half ks[kBK * kD];
  __shared__ __align__(16) __half vs[kBK * kD];
  const int bh = blockIdx.y;
  if (bh >= batch_heads) return;
  const int q0 = static_cast<int>(blockIdx.x) * kBQ;
  const int qi = q0 + static_cast<int>(threadIdx.x >> 1);
  const int dh = (threadIdx.x & 1) * kDT;  // first dim owned by this thread
  const unsigned pair = 3u << ((threadIdx.x & 31) & ~1u);
  const bool active = qi < lq;
  const long long kv_base = static_cast<long long>(bh) * lk * kD;

  // Keys this query may see, and the most any query of the block may see.
  int kmax = 0;
  if (active) kmax = causal ? min(lk, max(0, qi + lk - lq + 1)) : lk;
  const int q_last = min(q0 + kBQ - 1, lq - 1);
  const int block_kmax = causal ? min(lk, max(0, q_last + lk - lq + 1)) : lk;

  // Scores are computed in the log2 domain: q is pre-scaled by scale * log2(e).
  const float qscale = scale * kLog2e;
#if KCACHE_ATTN_ACCUM_HALF
  __half2 qh[kDT / 2], acc[kDT / 2];
#else
  float qf[kDT], acc[kDT];
#endif
  {
    const uint4* src = reinterpret_cast<const uint4*>(
        q + (static_cast<long long>(bh) * lq + (active ? qi : 0)) * kD + dh);
#pragma unroll
    for (int c = 0; c < kDT / 8; ++c) {
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (active) raw = src[c];
      const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __half22float2(h[e]);
#if KCACHE_ATTN_ACCUM_HALF
        qh[c * 4 + e] = __floats2half2_rn(f.x * qscale, f.y * qscale);
        acc[c * 4 + e] = __float2half2_rn(0.f);
#else
        qf[c * 8 + 2 * e] = f.x * qscale;
        qf[c * 8 + 2 * e + 1] = f.y * qscale;
        acc[c * 8 + 2 * e] = 0.f;
        acc[c * 8 + 2 * e + 1] = 0.f;
#endif
      }
    }
  }

  float m = kcache_k::neg_inf(), l = 0.f;
  for (int k0 = 0; k0 < block_kmax; k0 += kBK) {
    __syncthreads();  // previous tile fully consumed
    {
      const uint4* kg = reinterpret_cast<const uint4*>(k + kv_base + static_cast<long long>(k0) * kD);
      const uint4* vg = reinterpret_cast<const uint4*>(v + kv_base + static_cast<long long>(k0) * kD);
      uint4* kd = reinterpret_cast<uint4*>(ks);
      uint4* vd = reinterpret_cast<uint4*>(vs);
#pragma unroll
      for (int i = threadIdx.x; i < kBK * kD / 8; i += kThreads) {
        const int row = i / (kD / 8);
        uint4 kk = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
        if (k0 + row < lk) {
          kk = kg[i];
          vv = vg[i];
        }
        kd[i] = kk;
        vd[i] = vv;
      }
    }
    __syncthreads();

    const int nk = min(kBK, kmax - k0);  // keys of this tile visible to this query
#pragma unroll 1
    for (int j = 0; j < nk; ++j) {
      const uint4* kr = reinterpret_cast<const uint4*>(ks + j * kD + dh);
#if KCACHE_ATTN_ACCUM_HALF
      __half2 d2 = __float2half2_rn(0.f);
#pragma unroll
      for (int c = 0; c < kDT / 8; ++c) {
        const uint4 raw = kr[c];
        const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; ++e) d2 = __hfma2(qh[c * 4 + e], h[e], d2);
      }
      d2 = __hadd2(d2, __shfl_xor_sync(pair, d2, 1));
      const float2 df = __half22float2(d2);
      const float s = df.x + df.y;
#else
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < kDT / 8; ++c) {
        const uint4 raw = kr[c];
        const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __half22float2(h[e]);
          s = fmaf(qf[c * 8 + 2 * e], f.x, s);
          s = fmaf(qf[c * 8 + 2 * e + 1], f.y, s);
        }
      }
      s += __shfl_xor_sync(pair, s, 1);
#endif
      // Both threads of the pair hold the same s, m and l from here on.
      if (s > m) {
        const float corr = exp2f(m - s);  // 0 on the first key (m = -inf)
        l *= corr;
#if KCACHE_ATTN_ACCUM_HALF
        const __half2 corr2 = __float2half2_rn(corr);
#pragma unroll
        for (int c = 0; c < kDT / 2; ++c) acc[c] = __hmul2(acc[c], corr2);
#else
#pragma unroll
        for (int c = 0; c < kDT; ++c) acc[c] *= corr;
#endif
        m = s;
      }
      const float p = exp2f(s - m);
      l += p;
      const uint4* vr = reinterpret_cast<const uint4*>(vs + j * kD + dh);
#if KCACHE_ATTN_ACCUM_HALF
      const __half2 p2 = __float2half2_rn(p);
#pragma unroll
      for (int c = 0; c < kDT / 8; ++c) {
        const uint4 raw = vr[c];
        const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[c * 4 + e] = __hfma2(p2, h[e], acc[c * 4 + e]);
      }
#else
#pragma unroll
      for (int c = 0; c < kDT / 8; ++c) {
        const uint4 raw = vr[c];
        const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __half22float2(h[e]);
          acc[c * 8 + 2 * e] = fmaf(p, f.x, acc[c * 8 + 2 * e]);
          acc[c * 8 + 2 * e + 1] = fmaf(p, f.y, acc[c * 8 + 2 * e + 1]);
        }
      }
#endif
    }
  }

  if (!active) return;
  const float inv = l > 0.f ? 1.f / l : 0.f;
  uint4* dst = reinterpret_cast<uint4*>(o + (static_cast<long long>(bh) * lq + qi) * kD + dh);
#pragma unroll
  for (int c = 0; c < kDT / 8; ++c) {
    uint4 raw;
    __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#if KCACHE_ATTN_ACCUM_HALF
      const float2 f = __half22float2(acc[c * 4 + e]);
      h[e] = __floats2half2_rn(f.x * inv, f.y * inv);
#else
      h[e] = __floats2half2_rn(acc[c * 8 + 2 * e] * inv, acc[c * 8 + 2 * e + 1] * inv);
#endif
    }
    dst[c] = raw;
  }
}
