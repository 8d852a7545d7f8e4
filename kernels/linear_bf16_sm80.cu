// bf16 linear layer on tensor cores (SM 8.0+): y = x . w^T (+ bias), fp32 accumulation.
//   x: [M, K], w: [N, K] (PyTorch Linear weight layout), bias: [N] or null, y: [M, N]; all bf16.
// mma.sync.m16n8k16 (bf16 -> f32) through inline PTX; tiles of 64x64x32 double-buffered in shared
// memory with cp.async (zero-filled at the edges). 4 warps, each owning a 32x32 block of y.
// cp.async needs K % 8 == 0 and 16-byte aligned x and w; other shapes take a plain-load path.
// Launch: grid = (ceil(N / 64), ceil(M / 64)), block = 128, static shared memory 20 KiB.
#include "common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "linear_bf16_sm80 needs sm_80 or newer (bf16 mma.sync, cp.async)"
#endif

namespace {
constexpr int kBM = 64, kBN = 64, kBK = 32;
constexpr int kLds = kBK + 8;  // padded row (80 bytes): conflict-free fragment loads
constexpr int kThreads = 128;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ unsigned ld_pair(const __nv_bfloat16* p) {
  return *reinterpret_cast<const unsigned*>(p);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copies rows [r0, r0 + 64) x cols [k0, k0 + 32) of src ([rows, K]) into dst ([64][kLds]).
__device__ __forceinline__ void load_tile(__nv_bfloat16 (*dst)[kLds],
                                          const __nv_bfloat16* __restrict__ src, int rows, int K,
                                          int r0, int k0, bool async_ok) {
  for (int i = threadIdx.x; i < kBM * (kBK / 8); i += kThreads) {
    const int r = i >> 2, c = (i & 3) * 8;
    const int gr = r0 + r, gk = k0 + c;
    if (async_ok) {
      const bool ok = gr < rows && gk < K;  // K % 8 == 0: a chunk is all in or all out
      cp_async16(&dst[r][c], ok ? src + static_cast<long long>(gr) * K + gk : src, ok ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        __nv_bfloat16 val = __float2bfloat16_rn(0.f);
        if (gr < rows && gk + e < K) val = src[static_cast<long long>(gr) * K + gk + e];
        dst[r][c + e] = val;
      }
    }
  }
}
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    linear_bf16_sm80(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                     const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ y, int M,
                     int N, int K) {
  __shared__ __align__(16) __nv_bfloat16 as[2][kBM][kLds];
  __shared__ __align__(16) __nv_bfloat16 bs[2][kBN][kLds];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;            // mma fragment coordinates
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const bool async_ok = (K % 8) == 0 && (reinterpret_cast<unsigned long long>(x) & 15) == 0 &&
                        (reinterpret_cast<unsigned long long>(w) & 15) == 0;

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int ktiles = (K + kBK - 1) / kBK;
  if (ktiles > 0) {
    load_tile(as[0], x, M, K, m0, 0, async_ok);
    load_tile(bs[0], w, N, K, n0, 0, async_ok);
  }
  cp_async_commit();

  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < ktiles) {
      load_tile(as[cur ^ 1], x, M, K, m0, (kt + 1) * kBK, async_ok);
      load_tile(bs[cur ^ 1], w, N, K, n0, (kt + 1) * kBK, async_ok);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile kt has landed
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      unsigned a[2][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = wm + mi * 16 + g;
        a[mi][0] = ld_pair(&as[cur][r][kk + 2 * t]);
        a[mi][1] = ld_pair(&as[cur][r + 8][kk + 2 * t]);
        a[mi][2] = ld_pair(&as[cur][r][kk + 2 * t + 8]);
        a[mi][3] = ld_pair(&as[cur][r + 8][kk + 2 * t + 8]);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int n = wn + ni * 8 + g;
        b[ni][0] = ld_pair(&bs[cur][n][kk + 2 * t]);
        b[ni][1] = ld_pair(&bs[cur][n][kk + 2 * t + 8]);
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_bf16(acc[mi][ni], a[mi], b[ni]);
    }
    __syncthreads();  // stage cur is refilled by the next iteration's prefetch
  }

  const bool pair_store = (N % 2) == 0 && (reinterpret_cast<unsigned long long>(y) & 3) == 0;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int col = n0 + wn + ni * 8 + 2 * t;
      float b0 = 0.f, b1 = 0.f;
      if (bias) {
        if (col < N) b0 = __bfloat162float(bias[col]);
        if (col + 1 < N) b1 = __bfloat162float(bias[col + 1]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm + mi * 16 + g + h * 8;
        if (row >= M) continue;
        const float v0 = acc[mi][ni][2 * h] + b0, v1 = acc[mi][ni][2 * h + 1] + b1;
        __nv_bfloat16* dst = y + static_cast<long long>(row) * N + col;
        if (pair_store && col + 1 < N) {
          *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
        } else {
          if (col < N) dst[0] = __float2bfloat16_rn(v0);
          if (col + 1 < N) dst[1] = __float2bfloat16_rn(v1);
        }
      }
    }
  }
}
