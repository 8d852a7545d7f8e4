// A small torch extension for tests/torch: a CPU function (called by the test) and the binding
// of a CUDA kernel from kcache_ext_kernel.cu (compiled, linked, never launched: no GPU here).
#include <torch/extension.h>

torch::Tensor scale_cuda(torch::Tensor x, double factor);

torch::Tensor scale_cpu(torch::Tensor x, double factor) { return x * factor + 1; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale_cpu", &scale_cpu, "x * factor + 1 on the CPU");
  m.def("scale_cuda", &scale_cuda, "x * factor on the GPU");
}
