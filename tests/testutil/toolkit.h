// The default CUDA toolkit ($CUDA_HOME, else /usr/local/cuda), loaded once per test binary and
// shared by every test that compiles: a load dlopens NVRTC and reads build ids (~30-300 ms).
//
//   void SetUp() override {
//     absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = kcache::testing::SharedToolkit();
//     ASSERT_TRUE(toolkit.ok()) << toolkit.status();
//   }
#ifndef KCACHE_TESTS_TESTUTIL_TOOLKIT_H_
#define KCACHE_TESTS_TESTUTIL_TOOLKIT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/compile/toolkit.h"

namespace kcache::testing {

// The load's result, the same object for every call (a failure too). Thread-safe.
inline const absl::StatusOr<std::shared_ptr<const Toolkit>>& SharedToolkit() {
  static const auto* toolkit =
      new absl::StatusOr<std::shared_ptr<const Toolkit>>(Toolkit::Load(Toolkit::DefaultRoot()));
  return *toolkit;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_TOOLKIT_H_
