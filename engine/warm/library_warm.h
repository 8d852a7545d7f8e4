// SASS built from a library's PTX into a store, for the targets PlanLibrary says it lacks
// (`kcache warm --library`; docs/ptx-libraries.md).
#ifndef KCACHE_ENGINE_WARM_LIBRARY_WARM_H_
#define KCACHE_ENGINE_WARM_LIBRARY_WARM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/target.h"
#include "engine/fatbin/library.h"
#include "engine/fatbin/library_plan.h"

namespace kcache {

class Compiler;
class Store;

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
  std::vector<fatbin::TargetPlan> plan;
  std::vector<BuiltEntry> built;  // in plan order; cached ones included
};

// Builds every kBuild of PlanLibrary(library, targets) with `compiler` (a PTX job each,
// CompileJob::ptx: nvJitLink, one at a time, checked to be a cubin for the SM built) and stores
// each cubin under PtxSassKey (engine/fatbin/ptx_sass.h) in `store`, unless the store holds that
// key already. Stops at the first failure, its message naming the library, the entry and the
// target: DataLoss / InvalidArgument for a PTX payload that does not decompress
// (engine/fatbin/fatbin.h) or has no .target, Aborted with nvJitLink's log when the PTX does not
// compile, FailedPrecondition when the toolkit has no nvJitLink, Internal for a cubin of the wrong
// SM, the store's errors as Put gives them; what was stored before stays.
absl::StatusOr<LibraryWarmResult> WarmLibrary(const fatbin::Library& library,
                                              const std::vector<Target>& targets, Store& store,
                                              Compiler& compiler,
                                              LibraryWarmObserver* observer = nullptr);

}  // namespace kcache

#endif  // KCACHE_ENGINE_WARM_LIBRARY_WARM_H_
