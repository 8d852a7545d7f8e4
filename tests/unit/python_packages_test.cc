// Which files of a Python package `kcache warm --package` reads (client/cli/python_packages.h).
#include "client/cli/python_packages.h"

#include <gtest/gtest.h>

namespace kcache::cli {
namespace {

TEST(PythonPackagesTest, SharedObjectsCubinsAndFatbinsMayCarryCudaCode) {
  for (const char* path : {"nvidia/cublas/lib/libcublas.so.12", "torch/lib/libtorch_cuda.so",
                           "x/libnvrtc.so.12.8.93", "k/kernels.cubin", "k/kernels.fatbin",
                           "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"}) {
    EXPECT_TRUE(MayCarryCudaCode(path)) << path;
  }
  for (const char* path : {"mylib/__init__.py", "lib/libfoo.so.12.py", "lib/libfoo.sooo",
                           "include/cuda.h", "lib/libcudart.a", "x.so.d/readme"}) {
    EXPECT_FALSE(MayCarryCudaCode(path)) << path;
  }
}

}  // namespace
}  // namespace kcache::cli
