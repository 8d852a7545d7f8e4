// Which targets a library lacks SASS for, and building that SASS from its PTX into a store
// (`kcache warm --library`; docs/ptx-libraries.md).
#ifndef KCACHE_ENGINE_FATBIN_LIBRARY_WARM_H_
#define KCACHE_ENGINE_FATBIN_LIBRARY_WARM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/target.h"
#include "engine/fatbin/library.h"

namespace kcache {
class Store;
class Toolkit;
}  // namespace kcache

namespace kcache::fatbin {

// What a library needs for one target.
struct TargetPlan {
  enum class Decision : uint8_t {
    kHasSass,  // an entry's SASS runs on the target's SM: nothing is built
    kBuild,    // no SASS runs there; `ptx_entry` is compiled to `build`
    kNoCode,   // neither SASS that runs there nor PTX at or below it: nothing can be built
  };
  Target target;  // as asked (sm_89)
  Decision decision = Decision::kNoCode;
  std::optional<size_t> sass_entry;  // kHasSass: the entry whose SASS runs there
  std::optional<size_t> ptx_entry;   // kBuild: the PTX compiled (index into entries())
  Target build;                      // kBuild: the SASS target compiled to
  std::string note;                  // kNoCode: why nothing can be built
};

// For each of `targets` (sm_ targets), in order, by the serving rules' compatibility
// (core/compat.h, CompatibilityOf): SASS for sm_XY[f] runs on X.Z for Z >= Y; sm_XYa only on
// X.Y. Otherwise the best PTX for the SM (PickBest: the highest arch not above it; compute_XYa
// only for X.Y) is built, for the target's SM with the target's variant, or `a` when the PTX is
// arch-specific (nvJitLink compiles compute_90a only to sm_90a). Entries of relocatable
// device code (__nv_relfatbin) are left out: they run only after a device link.
std::vector<TargetPlan> PlanLibrary(const Library& library, const std::vector<Target>& targets);

// One PTX -> SASS compile, as reported to a LibraryWarmObserver.
struct BuiltEntry {
  std::string library;
  Target ptx;           // the PTX's target
  Target sass;          // what was built
  std::string key;      // ArtifactKey::ToString()
  bool cached = false;  // the store already held it: nothing compiled
  uint64_t micros = 0;  // the compile's wall time (0 when cached)
  uint64_t bytes = 0;   // the cubin's size
};

// Called from the thread running WarmLibrary, once per planned build, after it finished.
class LibraryWarmObserver {
 public:
  virtual ~LibraryWarmObserver() = default;
  virtual void OnBuilt(const BuiltEntry& entry) = 0;
};

struct LibraryWarmResult {
  std::vector<TargetPlan> plan;
  std::vector<BuiltEntry> built;  // in plan order; cached ones included
};

// Builds every kBuild of PlanLibrary(library, targets) with `toolkit`'s nvJitLink (in this
// process, one at a time) and stores each cubin under PtxSassKey (ptx_sass.h) in `store`,
// unless the store holds that key already. Each cubin is checked to be a cubin for the SM built
// before it is stored. Stops at the first failure: DataLoss / InvalidArgument for a PTX payload
// that does not decompress (fatbin.h), Aborted with nvJitLink's log when the PTX does not
// compile, FailedPrecondition when the toolkit has no nvJitLink, Internal for a cubin of the
// wrong SM, the store's errors as Put gives them; what was stored before stays.
absl::StatusOr<LibraryWarmResult> WarmLibrary(const Library& library,
                                              const std::vector<Target>& targets, Store& store,
                                              const Toolkit& toolkit,
                                              LibraryWarmObserver* observer = nullptr);

}  // namespace kcache::fatbin

#endif  // KCACHE_ENGINE_FATBIN_LIBRARY_WARM_H_
