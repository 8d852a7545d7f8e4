// Sinusoidal timestep embedding (diffusers get_timestep_embedding semantics).
//   half = dim / 2, freq[j] = exp(-ln(max_period) * j / (half - downscale_freq_shift))
//   arg[j] = scale * (t * freq[j])
//   out[i] = [sin(arg), cos(arg)]  ([cos, sin] when flip_sin_to_cos != 0); odd dim: last column 0.
// timesteps: [n] fp32, out: [n, dim]. Launch: grid = n (grid-stride over rows), block = 256.
#include "common.cuh"

template <typename T>
__global__ void __launch_bounds__(256)
    timestep_embedding(const float* __restrict__ timesteps, T* __restrict__ out, int n, int dim,
                       float max_period, float downscale_freq_shift, float scale,
                       int flip_sin_to_cos) {
  const int half_dim = dim / 2;
  const float log_period = logf(max_period);
  const float denom = static_cast<float>(half_dim) - downscale_freq_shift;
  for (int row = blockIdx.x; row < n; row += gridDim.x) {
    const float t = timesteps[row];
    T* dst = out + static_cast<long long>(row) * dim;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
      float v = 0.f;
      if (c < 2 * half_dim) {
        const bool first = c < half_dim;
        const int j = first ? c : c - half_dim;
        const float freq = expf(-log_period * static_cast<float>(j) / denom);
        const float arg = scale * (t * freq);
        float s, co;
        sincosf(arg, &s, &co);
        v = (first != (flip_sin_to_cos != 0)) ? s : co;
      }
      dst[c] = kcache_k::from_float<T>(v);
    }
  }
}
