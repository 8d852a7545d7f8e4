// Synthetic store entries for daemon tests: kernel records and artifacts with recognisable
// bytes (not real code) under a fake toolkit id, put straight into an open store, so that a
// test can serve from a store without compiling.
#ifndef KCACHE_TESTS_TESTUTIL_SYNTHETIC_H_
#define KCACHE_TESTS_TESTUTIL_SYNTHETIC_H_

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "engine/store/store.h"

namespace kcache::testing {

inline constexpr char kFakeToolkit[] = "nvrtc-13.0+000000000000";

// A kernel record for `source`, as the daemon computes it from the wire.
inline KernelRecord Record(const std::string& name, const std::string& source, int min_arch = 0) {
  KernelRecord record;
  record.spec.name = name;
  record.spec.source = source;
  record.id = ComputeKernelId(record.spec);
  record.arch.min_arch = min_arch;
  record.registered_unix_ms = NowUnixMillis();
  return record;
}

// Stores a synthetic artifact for `target` ("sm_86", "compute_80") into an open store; the
// daemon serves it as it would a real one. Bytes default to "synthetic <target>".
inline void PutSynthetic(Store& store, const KernelRecord& record, const std::string& target,
                         std::string bytes = "") {
  Artifact artifact;
  artifact.meta.key.kernel_id = record.id;
  artifact.meta.key.target = *ParseTarget(target);
  artifact.meta.key.kind =
      artifact.meta.key.target.kind == TargetKind::kPtx ? ArtifactKind::kPtx : ArtifactKind::kCubin;
  artifact.meta.key.toolkit = kFakeToolkit;
  artifact.meta.kernel_name = record.spec.name;
  artifact.meta.created_unix_ms = NowUnixMillis();
  artifact.meta.min_driver = 13000;
  artifact.bytes = bytes.empty() ? "synthetic " + target : std::move(bytes);
  ASSERT_TRUE(store.PutKernel(record).ok());
  ASSERT_TRUE(store.Put(artifact).ok());
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_SYNTHETIC_H_
