// Which targets a library lacks SASS for, by the serving rules, and which of its PTX entries
// each is built from (`kcache warm --library --dry-run` prints it; docs/ptx-libraries.md).
#ifndef KCACHE_ENGINE_FATBIN_LIBRARY_PLAN_H_
#define KCACHE_ENGINE_FATBIN_LIBRARY_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/target.h"
#include "engine/fatbin/library.h"

namespace kcache::fatbin {

// What one fatbin of a library (one module's code) needs for one target.
struct TargetPlan {
  enum class Decision : uint8_t {
    kHasSass,  // an entry's SASS runs on the target's SM: nothing is built
    kBuild,    // no SASS runs there; `ptx_entry` is compiled to `build`
    kNoCode,   // neither SASS that runs there nor PTX kcache can build from: nothing is built
  };
  Target target;      // as asked (sm_89)
  size_t fatbin = 0;  // FatbinEntry::fatbin of the entries planned
  Decision decision = Decision::kNoCode;
  std::optional<size_t> sass_entry;  // kHasSass: the entry whose SASS runs there
  std::optional<size_t> ptx_entry;   // kBuild: the PTX compiled (index into entries())
  Target build;                      // kBuild: the SASS target compiled to
  std::string note;                  // kNoCode: why nothing can be built
};

// For each of `targets` (sm_ targets), in order, and for each fatbin of the library with code a
// module load runs (in file order: each is one module the driver loads and JITs on its own, so
// each gets its own plan; a library with none gets one plan, saying why), by the serving rules'
// compatibility (core/compat.h, CompatibilityOf): SASS for sm_XY[f] runs on X.Z for Z >= Y; sm_XYa
// only on X.Y. Otherwise the best PTX for the SM (PickBest: the highest arch not above it;
// compute_XYa only for X.Y) is built, for the target's SM with the target's variant, or `a` when
// the PTX is arch-specific (nvJitLink compiles compute_90a only to sm_90a), unless that PTX
// carries JIT options in its header (the driver JITs it with them; kcache builds with
// PtxSassCompileOptions alone): then kNoCode, saying so. Entries of relocatable
// device code (__nv_relfatbin) are left out: they run only after a device link.
std::vector<TargetPlan> PlanLibrary(const Library& library, const std::vector<Target>& targets);

// The SASS target PTX for `ptx` (a compute_ target) is built to for `target` (an sm_ target), by
// the rule above: the target's SM with its variant, or `a` when the PTX is arch-specific; nullopt
// when that PTX does not run there (PickBest: above the SM, or compute_XYa for another SM).
std::optional<Target> SassTargetFor(const Target& ptx, const Target& target);

}  // namespace kcache::fatbin

#endif  // KCACHE_ENGINE_FATBIN_LIBRARY_PLAN_H_
