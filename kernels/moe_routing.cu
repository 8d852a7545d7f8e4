// Mixture-of-experts routing and token sampling, built on CUB block primitives and cuda::std.
//
// moe_topk_softmax<T, BLOCK, ITEMS>: per token, softmax over the expert logits and the top-k
//   experts. logits: [tokens, E] (E <= BLOCK * ITEMS), topk_weights: [tokens, k] fp32,
//   topk_ids: [tokens, k] int32, ordered by descending logit; ties go to the lower expert id.
//   weight = softmax probability, or probability / (sum of the k selected) if renormalize != 0.
//   Logits must not be NaN. Launch: grid = tokens (grid-stride), block = BLOCK.
//
// moe_align<BLOCK, ITEMS>: groups the flattened (token, slot) entries by expert for a grouped
//   GEMM, each expert's segment padded to a multiple of `align`. Single block.
//   topk_ids: [numel] int32 (ids outside [0, E) are dropped), E <= BLOCK * ITEMS.
//   expert_offsets: [E + 1], segment start of each expert; expert_offsets[E] = padded total.
//   sorted_ids: [capacity]; sorted_ids[expert_offsets[e] + j] = j-th flat index (ascending)
//   routed to e; padding slots hold numel. block_expert_ids: [capacity]; entry b (for
//   b < total / align) is the expert owning rows [b * align, (b + 1) * align).
//   Writes beyond capacity are dropped; capacity >= numel + E * (align - 1) always suffices.
//   Launch: grid = 1, block = BLOCK.
//
// top_k_top_p_sample<T, BLOCK, ITEMS>: one sampled candidate per row. logits: [rows, n]
//   (n <= BLOCK * ITEMS; finite or -inf), uniform: [rows] numbers in [0, 1), sampled: [rows].
//   x = logits / temperature; candidates sorted by x descending (ties: lower index first);
//   the first top_k are kept (top_k <= 0: all); of those, rank r is kept if the softmax mass of
//   the ranks before it is < top_p (rank 0 always); sampled = the first kept rank whose
//   cumulative mass exceeds uniform * kept mass. temperature <= 0 picks the largest logit.
//   Launch: grid = rows (grid-stride), block = BLOCK.
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>
#include <cuda/std/limits>
#include <cuda/std/type_traits>

#include "common.cuh"

template <typename T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
    moe_topk_softmax(const T* __restrict__ logits, float* __restrict__ topk_weights,
                     int* __restrict__ topk_ids, int tokens, int num_experts, int k,
                     int renormalize) {
  static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of the warp size");
  static_assert(cuda::std::is_same_v<T, float> || cuda::std::is_same_v<T, __half> ||
                    cuda::std::is_same_v<T, __nv_bfloat16>,
                "unsupported logit type");
  using Sort = cub::BlockRadixSort<float, BLOCK, ITEMS, int>;
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ float s_bcast;
  constexpr float kNegInf = -cuda::std::numeric_limits<float>::infinity();

  for (int tok = blockIdx.x; tok < tokens; tok += gridDim.x) {
    const T* row = logits + static_cast<long long>(tok) * num_experts;
    float key[ITEMS];
    int idx[ITEMS];
    float local_max = kNegInf;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int e = threadIdx.x * ITEMS + i;  // blocked: rank order == expert order
      key[i] = e < num_experts ? kcache_k::to_float(row[e]) + 0.f : kNegInf;  // -0 -> +0
      idx[i] = e;
      local_max = cuda::std::max(local_max, key[i]);
    }
    float m = Reduce(tmp.reduce).Reduce(local_max, cuda::maximum<float>{});
    if (threadIdx.x == 0) s_bcast = m;
    __syncthreads();
    m = s_bcast;
    if (m == kNegInf) m = 0.f;  // all logits -inf: every probability is 0
    __syncthreads();

    float local_sum = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (idx[i] < num_experts) local_sum += expf(key[i] - m);
    float total = Reduce(tmp.reduce).Sum(local_sum);
    if (threadIdx.x == 0) s_bcast = total;
    __syncthreads();
    total = s_bcast;
    __syncthreads();

    Sort(tmp.sort).SortDescending(key, idx);  // stable; result is blocked by rank
    __syncthreads();

    float denom = total;
    if (renormalize) {
      float sel = 0.f;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (static_cast<int>(threadIdx.x) * ITEMS + i < k) sel += expf(key[i] - m);
      sel = Reduce(tmp.reduce).Sum(sel);
      if (threadIdx.x == 0) s_bcast = sel;
      __syncthreads();
      denom = s_bcast;
      __syncthreads();
    }
    const float inv = denom > 0.f ? 1.f / denom : 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int r = threadIdx.x * ITEMS + i;
      if (r < k && r < num_experts) {
        topk_weights[static_cast<long long>(tok) * k + r] = expf(key[i] - m) * inv;
        topk_ids[static_cast<long long>(tok) * k + r] = idx[i];
      }
    }
  }
}

// Samples one token per row from candidate logits with temperature, top-k and top-p.
template <typename T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
    top_k_top_p_sample(const T* __restrict__ logits, const float* __restrict__ uniform,
                       int* __restrict__ sampled, int rows, int n, float temperature, int top_k,
                       float top_p) {
  static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of the warp size");
  using Sort = cub::BlockRadixSort<float, BLOCK, ITEMS, int>;
  using ScanF = cub::BlockScan<float, BLOCK>;
  using ReduceI = cub::BlockReduce<int, BLOCK>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename ScanF::TempStorage scan;
    typename ReduceI::TempStorage reduce;
  } tmp;
  __shared__ float s_max;
  __shared__ int s_rank;
  constexpr float kNegInf = -cuda::std::numeric_limits<float>::infinity();
  constexpr int kNone = cuda::std::numeric_limits<int>::max();
  const bool greedy = !(temperature > 0.f);
  const float inv_t = greedy ? 1.f : 1.f / temperature;
  const int kk = (top_k <= 0 || top_k > n) ? n : top_k;

  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = logits + static_cast<long long>(row) * n;
    float key[ITEMS];
    int idx[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int e = threadIdx.x * ITEMS + i;
      key[i] = e < n ? kcache_k::to_float(x[e]) * inv_t : kNegInf;
      idx[i] = e;
    }
    Sort(tmp.sort).SortDescending(key, idx);  // stable: ties keep the lower index first
    if (threadIdx.x == 0) s_max = key[0];
    __syncthreads();
    const float m = s_max;

    // Unnormalised probabilities of the top-k ranks, then the top-p cut: rank r is kept
    // while the mass before it is below top_p of the top-k mass (rank 0 always is).
    float p[ITEMS], before[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int r = threadIdx.x * ITEMS + i;
      p[i] = (r < kk && key[i] != kNegInf) ? expf(key[i] - m) : 0.f;
    }
    float mass = 0.f;
    ScanF(tmp.scan).ExclusiveSum(p, before, mass);
    __syncthreads();
    int kept = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int r = threadIdx.x * ITEMS + i;
      if (r > 0 && !(before[i] < top_p * mass)) p[i] = 0.f;
      if (r < kk && (r == 0 || p[i] > 0.f)) kept = r + 1;
    }
    // Draw: the first kept rank whose inclusive mass exceeds u * kept mass.
    float kept_mass = 0.f;
    ScanF(tmp.scan).ExclusiveSum(p, before, kept_mass);
    __syncthreads();
    const float target = uniform[row] * kept_mass;
    int pick = kNone;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int r = threadIdx.x * ITEMS + i;
      if (pick == kNone && p[i] > 0.f && target < before[i] + p[i]) pick = r;
    }
    pick = ReduceI(tmp.reduce).Reduce(pick, cuda::minimum<int>{});
    __syncthreads();
    kept = ReduceI(tmp.reduce).Reduce(kept, cuda::maximum<int>{});
    if (threadIdx.x == 0) s_rank = greedy ? 0 : (pick != kNone ? pick : kept - 1);
    __syncthreads();
    const int rank = s_rank;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (static_cast<int>(threadIdx.x) * ITEMS + i == rank) sampled[row] = idx[i];
    __syncthreads();
  }
}

template <int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
    moe_align(const int* __restrict__ topk_ids, int numel, int num_experts, int align,
              int capacity, int* __restrict__ expert_offsets, int* __restrict__ sorted_ids,
              int* __restrict__ block_expert_ids) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, <= 1024");
  constexpr int kMaxExperts = BLOCK * ITEMS;
  constexpr int kWarps = BLOCK / 32;
  using Scan = cub::BlockScan<int, BLOCK>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int s_count[kMaxExperts];   // per-expert count, then per-expert fill cursor
  __shared__ int s_offset[kMaxExperts];
  if (blockIdx.x != 0) return;
  num_experts = cuda::std::min(num_experts, kMaxExperts);  // precondition; keeps smem in bounds
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int e = tid; e < kMaxExperts; e += BLOCK) s_count[e] = 0;
  __syncthreads();
  for (int i = tid; i < numel; i += BLOCK) {
    const int e = topk_ids[i];
    if (e >= 0 && e < num_experts) atomicAdd(&s_count[e], 1);
  }
  __syncthreads();

  int padded[ITEMS], start[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int e = tid * ITEMS + i;
    const int c = e < num_experts ? s_count[e] : 0;
    padded[i] = (c + align - 1) / align * align;
  }
  int total = 0;
  Scan(scan_tmp).ExclusiveSum(padded, start, total);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int e = tid * ITEMS + i;
    if (e < num_experts) {
      s_offset[e] = start[i];
      s_count[e] = 0;  // becomes the fill cursor; only this thread touched s_count[e] above
      expert_offsets[e] = start[i];
      for (int b = start[i] / align; b < (start[i] + padded[i]) / align; ++b)
        if (static_cast<long long>(b) * align < capacity) block_expert_ids[b] = e;
    }
  }
  if (tid == 0) expert_offsets[num_experts] = total;
  const int limit = cuda::std::min(total, capacity);
  for (int j = tid; j < limit; j += BLOCK) sorted_ids[j] = numel;
  __syncthreads();

  // Scatter in index order: chunks of BLOCK entries, warps in turn; __match_any_sync ranks
  // lanes that share an expert, the group leader advances that expert's cursor.
  for (int base = 0; base < numel; base += BLOCK) {
    const int i = base + tid;
    int e = i < numel ? topk_ids[i] : -1;
    const bool valid = e >= 0 && e < num_experts;
    if (!valid) e = -1;
    const unsigned peers = __match_any_sync(kcache_k::kFullMask, e);
    const int leader = __ffs(peers) - 1;
    const int rank = __popc(peers & ((1u << lane) - 1u));
    for (int w = 0; w < kWarps; ++w) {
      if (warp == w) {
        int old = 0;
        if (valid && lane == leader) {
          old = s_count[e];
          s_count[e] = old + __popc(peers);
        }
        old = __shfl_sync(kcache_k::kFullMask, old, leader);
        const int pos = valid ? s_offset[e] + old + rank : capacity;
        if (valid && pos < capacity) sorted_ids[pos] = i;
      }
      __syncthreads();
    }
  }
}
