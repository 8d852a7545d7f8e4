// Rotary position embedding, GPT-NeoX layout, applied in place to q and k.
//   q: [tokens, heads_q, head_dim], k: [tokens, heads_k, head_dim], positions: [tokens] int32.
//   The first rot_dim (even, <= head_dim) channels of each head rotate as pairs (i, i + rot_dim/2):
//     inv_freq[i] = base^(-2i / rot_dim), a = positions[t] * inv_freq[i]
//     x0' = x0 cos a - x1 sin a,  x1' = x1 cos a + x0 sin a     (fp32 math)
//   Channels >= rot_dim are left unchanged. k may be null (heads_k ignored).
// Launch: grid = tokens (grid-stride over tokens), block = 256.
#include "common.cuh"

template <typename T>
__global__ void __launch_bounds__(256)
    rotary_embedding(const int* __restrict__ positions, T* __restrict__ q, T* __restrict__ k,
                     int tokens, int heads_q, int heads_k, int head_dim, int rot_dim,
                     float base) {
  const int half_rot = rot_dim / 2;
  const int nk = k ? heads_k : 0;
  const int pairs = (heads_q + nk) * half_rot;
  for (int t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float pos = static_cast<float>(positions[t]);
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
      const int h = p / half_rot;
      const int i = p - h * half_rot;
      T* head = h < heads_q
                    ? q + (static_cast<long long>(t) * heads_q + h) * head_dim
                    : k + (static_cast<long long>(t) * heads_k + (h - heads_q)) * head_dim;
      const float inv_freq = powf(base, -static_cast<float>(2 * i) / static_cast<float>(rot_dim));
      float s, c;
      sincosf(pos * inv_freq, &s, &c);
      const float x0 = kcache_k::to_float(head[i]);
      const float x1 = kcache_k::to_float(head[i + half_rot]);
      head[i] = kcache_k::from_float<T>(x0 * c - x1 * s);
      head[i + half_rot] = kcache_k::from_float<T>(x1 * c + x0 * s);
    }
  }
}
