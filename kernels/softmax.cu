// Row-wise, numerically stable softmax: y[r, :] = softmax(scale * x[r, :]), fp32 math.
// One pass computes the running max and sum together (online softmax), a second writes y.
// -inf inputs contribute 0; a row that is entirely -inf produces zeros.
// x, y: [rows, cols]. Launch: grid = rows (grid-stride over rows), block = 256.
#include "common.cuh"

template <typename T>
__global__ void __launch_bounds__(256)
    softmax(const T* __restrict__ x, T* __restrict__ y, int rows, int cols, float scale) {
  __shared__ kcache_k::MaxSum scratch[32];
  const float ninf = kcache_k::neg_inf();
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + static_cast<long long>(row) * cols;
    T* yr = y + static_cast<long long>(row) * cols;
    kcache_k::MaxSum st{ninf, 0.f};
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = scale * kcache_k::to_float(xr[c]);
      if (v == ninf) continue;
      if (v > st.m) {
        st.s = st.s * expf(st.m - v) + 1.f;
        st.m = v;
      } else {
        st.s += expf(v - st.m);
      }
    }
    st = kcache_k::block_maxsum(st, scratch);
    const float inv = st.s > 0.f ? 1.f / st.s : 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = scale * kcache_k::to_float(xr[c]);
      yr[c] = kcache_k::from_float<T>(v == ninf ? 0.f : expf(v - st.m) * inv);
    }
  }
}
