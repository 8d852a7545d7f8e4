// SASS built from a library's PTX: the key it is stored under and how it maps onto the store's
// artifact schema (docs/ptx-libraries.md, "Keys"; docs/store-format.md, "SASS built from PTX").
// The one place that reads or writes these entries' ArtifactKey and ArtifactMeta fields.
//
//   key   {kernel_id = PtxModuleId(ptx, jit options, compile options), kind kCubin,
//          target = the sm_ target built, toolkit = ToolkitIdentity::id, driver 0}
//   meta  kernel_name   = the library's path, as `kcache warm --library` was given it
//         lowered_names = [(kPtxSassMarker, the PTX's target, e.g. "compute_75")]
//         compile_log   = nvJitLink's log; compile_micros, min_driver as a compile's
// No kernel record goes with them: they are found by key (the PTX's digest), never compiled
// from a record on a miss.
#ifndef KCACHE_ENGINE_FATBIN_PTX_SASS_H_
#define KCACHE_ENGINE_FATBIN_PTX_SASS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "core/target.h"

namespace kcache::fatbin {

// The options every PTX -> SASS compile passes to nvJitLink after -arch. Part of the key: a
// change here changes every key.
const std::vector<std::string>& PtxSassCompileOptions();

// The id of a PTX module, in the kernel id's place of its SASS's keys: SHA-256 of
//   "kcache.ptx-sass" %x00 u32le(1) field(ptx) field(jit_options) *('O' field(option))
// with field(x) = u64le(length of x) x, over the PTX text (up to its first NUL, as
// EntryPayload gives it), the fatbin entry's own options text ("" when none) and the compile
// options in order. Pinned by PtxSassTest.ModuleIdKnownAnswer.
KernelId PtxModuleId(absl::string_view ptx, absl::string_view jit_options,
                     const std::vector<std::string>& compile_options);

// The PTX target of PTX text: its `.target` directive's architecture (the first, before any
// ", debug" or ", texmode_..." after it) as compute_XY[a|f]. Comments before it are skipped.
// InvalidArgument, saying what was found, when there is no `.target` or it names no sm_ arch.
absl::StatusOr<Target> PtxTextTarget(absl::string_view ptx);

// The store key of the SASS for `sass_target` (an sm_ target) built from the PTX `module` by
// the toolkit `toolkit_id`.
ArtifactKey PtxSassKey(const KernelId& module, const Target& sass_target,
                       const std::string& toolkit_id);

// Marks an artifact as SASS built from a library's PTX: the first lowered-name pair's name.
// Not a C++ name expression (a single colon), so no kernel's artifact carries it.
inline constexpr char kPtxSassMarker[] = "kcache:from-ptx";

// Where such an entry came from.
struct PtxSassOrigin {
  // The path given to `kcache warm --library`; for SASS kcached built from PTX a load sent it
  // (libkcache-cuda.so's miss), "loaded by <client>".
  std::string library;
  Target ptx;  // the PTX's target, e.g. compute_75
};

// Whether `meta` is SASS built from a library's PTX.
bool IsPtxSassArtifact(const ArtifactMeta& meta);
// Its origin. Precondition: IsPtxSassArtifact(meta). A PTX target that does not parse reads as
// compute_0.
PtxSassOrigin PtxSassOriginOf(const ArtifactMeta& meta);

// The artifact storing `cubin` under `key`, from `origin`, with nvJitLink's `log`, the compile's
// wall time and the oldest driver that loads it (size and checksum are the store's to set).
Artifact PtxSassArtifact(const ArtifactKey& key, const PtxSassOrigin& origin, std::string cubin,
                         std::string log, uint64_t compile_micros, uint32_t min_driver);

}  // namespace kcache::fatbin

#endif  // KCACHE_ENGINE_FATBIN_PTX_SASS_H_
