// The compiler launcher: one compiler command served from an ObjectCache. A cacheable compile
// (core/compiler_command.h) is looked up by its key (object_key.h); a hit writes every output
// the command asked for (the object; the dependency file with this build's paths) and replays
// the compiler's stdout, stderr and exit code; a miss runs the real compiler unchanged and
// stores what it made. Anything else runs the real compiler in place of this process.
// A cache that fails (cannot open, a dead kcached, a full store, a corrupt entry) only costs
// the compile: the build stays correct.
#ifndef KCACHE_ENGINE_LAUNCHER_LAUNCHER_H_
#define KCACHE_ENGINE_LAUNCHER_LAUNCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler_command.h"
#include "engine/keys/compiler_tools.h"
#include "engine/launcher/handed_miss.h"
#include "engine/objects/object_cache.h"

namespace kcache::objects {

// A launcher's turn at a miss's compile (LauncherOptions::await_turn): kcached's one compile
// per miss. Destroying it ends the call (a turn it held with it).
class CompileTurn {
 public:
  virtual ~CompileTurn() = default;
  // Another launcher's compile of the command was stored while this one waited: look it up
  // again, then say whether that served the command (Served).
  virtual bool arrived() const = 0;
  virtual void Served(bool served) = 0;
  // This launcher compiled: its exit code, and whether its outputs were stored (why not).
  virtual void Compiled(int exit_code, const absl::Status& stored) = 0;
};

struct LauncherOptions {
  // Opens the cache; called at most twice per command (before the lookup and after a miss's
  // compile), so a store directory is held only while it is read or written.
  std::function<absl::StatusOr<std::unique_ptr<ObjectCache>>()> open_cache;
  // Opens the cache for the lookup only, when that is cheaper than open_cache (a store
  // directory read-only: nothing written, no lock, so parallel hits do not wait for each
  // other). Unset: open_cache.
  std::function<absl::StatusOr<std::unique_ptr<ObjectCache>>()> open_cache_to_read;
  // Base directories besides the working directory (KCACHE_BASEDIR).
  std::vector<std::string> base_dirs;
  // The file digest memo ("" keeps none); KCACHE_STATE_DIR/file-digests by default.
  std::string digest_table;
  // A compile output (object + dependency file + logs) larger than this is not stored
  // (--object-max-bytes, KCACHE_MAX_OBJECT_BYTES; default 256 MiB).
  uint64_t max_object_bytes = kDefaultMaxObjectBytes;
  // One line on stderr per command saying hit (with the milliseconds from the launcher's
  // start to its outputs written), miss or uncached and why (KCACHE_LOG=1).
  bool log = false;
  // Set by kcache-launch, which serves hits only: a miss, or a cache that cannot be opened,
  // calls it instead of compiling, with what this pass made of the command (it execs the full
  // kcache with that record, handed_miss.h, which compiles and stores) and leaves with what it
  // returns. The digest memo is saved first.
  std::function<int(const HandedMiss& made)> hand_off;
  // Set in the kcache a kcache-launch handed this command to, when its record is this
  // command's (client/launch/handed_miss_memfd.h checks): the real compiler, the key and the lookup
  // are taken from it, not made again (a miss goes straight to await_turn and the compile).
  // Not owned; outlives RunLauncher. Null: the full pass.
  const HandedMiss* handed = nullptr;
  // Told of every command that runs uncached, or whose compile is not stored, with the reason
  // and, when an option decided it, the option's name (UncachedOptionName; else ""): kcached
  // counts them (objects.uncached_<reason>, and by option). Unset: only the KCACHE_LOG line
  // says it.
  std::function<void(UncachedReason, absl::string_view option)> note_uncached;
  // Set for kcached (KCACHE_SERVER): called on a miss before compiling, with the command's
  // key1, the entry ids its lookup listed and the command's subject; it waits while another
  // launcher compiles the same command (docs/torch-extensions.md, "One compile per miss").
  // Null (or unset): compile at once.
  std::function<std::unique_ptr<CompileTurn>(
      const CommandKey& key1, const std::vector<std::string>& listed, const std::string& subject)>
      await_turn;
  // libkcache-observe.so (FindObserveLibrary, observed_manifest.h), preloaded into a miss's
  // compile to record what it reads; "" (not installed): every compile runs uncached.
  std::string observe_library;
  ToolLookup lookup;
};

enum class LaunchOutcome { kHit, kMiss, kUncached };

// Runs `compiler` (a name or path; for nvcc "" finds the real one) with `args`. Returns the
// exit code to leave with: the compiler's. Uncached commands do not return (exec).
int RunLauncher(const LauncherOptions& options, CompilerFamily family, const std::string& compiler,
                const std::vector<std::string>& args);

// Says whether the command would hit, and when not, which part of its key differs from the
// nearest recorded entry for the same source: one line.
std::string ExplainCompile(const LauncherOptions& options, CompilerFamily family,
                           const std::string& compiler, const std::vector<std::string>& args);

// The family a compiler name belongs to: nvcc for "nvcc", gcc for the rest.
CompilerFamily FamilyOfCompiler(const std::string& name);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_LAUNCHER_LAUNCHER_H_
