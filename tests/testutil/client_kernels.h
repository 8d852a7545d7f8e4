// The small test kernels of kernels.h as libkcache sources, for tests of the client.
#ifndef KCACHE_TESTS_TESTUTIL_CLIENT_KERNELS_H_
#define KCACHE_TESTS_TESTUTIL_CLIENT_KERNELS_H_

#include "kcache/kcache.h"
#include "tests/testutil/kernels.h"

namespace kcache::testing {

inline client::KernelSource SaxpySource() {
  client::KernelSource s;
  s.name = "saxpy";
  s.source = kSaxpySource;
  return s;
}

// scale<float> from a template, with a header; for 8.0 and newer when `min_arch` is 80.
inline client::KernelSource ScaleSource(int min_arch = 0) {
  client::KernelSource s;
  s.name = "scale";
  s.source = kScaleTemplateSource;
  s.headers["scale.cuh"] = kScaleHeader;
  s.name_expressions = {"scale<float>"};
  s.min_arch = min_arch;
  return s;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_CLIENT_KERNELS_H_
