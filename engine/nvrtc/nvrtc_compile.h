// An NVRTC compile as kcache keys it (docs/nvrtc-standin.md, "How a compile is keyed"): key1
// over what the caller gave NVRTC (nvrtcCreateProgram, nvrtcAddNameExpression,
// nvrtcCompileProgram) and which NVRTC ran it, and an entry's manifest over what the compile
// read, as kcache's NVRTC stand-in records it (client/nvrtc/nvrtc_reads.h): the files NVRTC
// opened and looked for, the variables it asked for. Two compiles share an entry only when
// both hold.
#ifndef KCACHE_ENGINE_NVRTC_NVRTC_COMPILE_H_
#define KCACHE_ENGINE_NVRTC_NVRTC_COMPILE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/compiler_command.h"
#include "core/library_build.h"
#include "core/object_entry.h"
#include "engine/keys/base_dirs.h"
#include "engine/keys/command_key.h"
#include "engine/keys/compiler_tools.h"
#include "engine/keys/file_digests.h"
#include "engine/observe/observed_reads.h"

namespace kcache::objects {

// What the caller passed NVRTC for one compile.
struct NvrtcProgram {
  std::string source;
  std::string name;  // nvrtcCreateProgram's name; "" for NULL
  // nvrtcCreateProgram's headers, in order: (include name, content).
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> name_expressions;  // in the order they were added
  std::vector<std::string> options;           // nvrtcCompileProgram's, in order
};

// Which NVRTC compiled it, and where.
struct NvrtcContext {
  std::string library;       // the real NVRTC's path
  int major = 0, minor = 0;  // what its nvrtcVersion said
  std::string cwd;           // the working directory: the program's name and relative -I
                             // directories are looked up from it
  // The GPU driver NVRTC loads (kNvrtcDriverLibrary) as the loader finds it here
  // (FindCudaDriver, core/library_build.h: the real one behind kcache's stand-in): its path; ""
  // when none loads.
  std::string driver;
  // kcache's shims directory ($KCACHE_SHIMS_DIR, base_dirs.h; "" when unset): options and read
  // paths under it (-I$CUDA_HOME/include under `kcache run`) are keyed as "@shims@", so that
  // one user's entries serve another's.
  std::string shims;
};

// The base directories a compile's manifest is made and checked with: the working directory
// and the shims directory.
BaseDirs NvrtcDirs(const NvrtcContext& context);

// The library NVRTC loads at every compile (it asks the driver for its export table). It is
// keyed in key1 (NvrtcContext::driver), not in the manifest: whether and which driver loads is
// a fact of the node, the same for every compile there.
inline constexpr const char* kNvrtcDriverLibrary = kCudaDriverLibrary;

// key1: KeyOverFields with a domain of NVRTC's own over the NVRTC library's build (its GNU
// build ID, else its bytes' digest: core/library_build.h) and version, the driver's build or
// "none", the working directory, the source's and each
// header's digest and name, the program's name, each option and each name expression, in the
// order given (options are not reordered: options given in another order make another key,
// never a wrong hit). FailedPrecondition, with *reason: kNativeTarget for an -arch=native
// (which GPU is here decides the code, and no key field says so); kUnreadableInput when the
// library or the driver cannot be read. Whether the clock reaches the output is not told from
// the text (a program can paste __TIME__ from pieces): `kcache nvrtc-put` compiles it again
// under another date before it stores it (client/cli/nvrtc_clock_probe.h).
absl::StatusOr<ObjectKey> NvrtcCommandKey(const NvrtcProgram& program, const NvrtcContext& context,
                                          UncachedReason* reason);

// The manifest of what the compile read (`record`: the stand-in's record, parsed by
// observe::ParseObservation), by ObservedManifest's rules for reads made inside one process
// (ObservedCompile::in_process), the driver left to key1. `env`: the caller's environment, as
// the compile saw it. FailedPrecondition, with *reason, as ObservedManifest's; also
// kNativeTarget when NVRTC read a variable that holds -arch=native (NVRTC_APPEND_FLAGS).
absl::StatusOr<HeaderManifest> NvrtcManifest(const observe::ObservedReads& record,
                                             const BaseDirs& dirs, const Environment& env,
                                             FileDigests& digests, absl::Time compiled_from,
                                             UncachedReason* reason);

// A program named by a path with a directory: the directory (absolute: a relative one taken
// against the working directory) and the name's last component. CuPy names each program in a
// temporary directory of its own (/tmp/tmpXXXXXXXX/<hash>.cubin.cu), a new one in every
// process, so that under key1's exact name no process is served another's compile.
struct NvrtcNameDirectory {
  std::string directory;
  std::string base;
};
// nullopt for a name without a directory, one ending in "/", or one whose directory is the
// working directory (key1 names that already) or "/".
std::optional<NvrtcNameDirectory> NvrtcNameDirectoryOf(const std::string& name,
                                                       const std::string& cwd);

// The key of a compile whose output was found not to depend on its program's directory
// (NvrtcAnyDirectoryManifest, and the same output compiled in another directory: `kcache
// nvrtc-put`), made from its key (NvrtcCommandKey's `key`, its program named in `name`): the same
// fields with the name's directory left out ("name in any directory": its last component; never
// the same key1 as a name's).
ObjectKey NvrtcAnyDirectoryKey(const ObjectKey& key, const NvrtcNameDirectory& name);

// The base directories an any-directory entry's manifest is made and checked with: the working
// directory, and the program's directory as the first root ("@base1@"), so that what the
// compile found there is checked in the directory of the program being served.
BaseDirs NvrtcAnyDirectoryDirs(const NvrtcContext& context, const NvrtcNameDirectory& name);

// Whether the program's directory and the name as a path existed when it compiled, as its
// manifest says (neither looked at: neither).
struct NvrtcDirectoryState {
  bool directory_exists = false;
  bool name_exists = false;
};
// `manifest` (made with NvrtcDirs) made again with NvrtcAnyDirectoryDirs, and the state it
// records. FailedPrecondition when NVRTC read or looked for anything in the directory other
// than the directory itself and the program's name as a path, stat'ed only: a compile in
// another directory could then read other files, which `kcache nvrtc-put`'s compile in a new
// directory could not show the same.
absl::StatusOr<std::pair<HeaderManifest, NvrtcDirectoryState>> NvrtcAnyDirectoryManifest(
    const HeaderManifest& manifest, const NvrtcContext& context, const NvrtcNameDirectory& name);

// A compile as the stand-in hands it to `kcache nvrtc-put` (client/nvrtc/nvrtc_cache.cc), for
// it to compile again elsewhere: the program and its context, each field framed.
std::string EncodeNvrtcCompile(const NvrtcProgram& program, const NvrtcContext& context);
// InvalidArgument when the bytes are not one.
absl::StatusOr<std::pair<NvrtcProgram, NvrtcContext>> DecodeNvrtcCompile(absl::string_view bytes);

// What a compile gave, as the caller saw it: the bytes an entry holds as its object
// (ObjectBundle::object; docs/store-format.md, "NVRTC outcomes"), replayed on a hit.
struct NvrtcOutput {
  int size_result = 0;  // the size getter's nvrtcResult (nvrtcGetPTXSize, ...)
  uint64_t size = 0;    // what it said, when it succeeded
  int result = 0;       // the content getter's (nvrtcGetPTX, ...)
  std::string bytes;    // what it wrote, when it succeeded
  bool operator==(const NvrtcOutput&) const = default;
};
// An output as a compile's getters answered it, kept as an outcome holds it: the size only when
// the size getter succeeded, `size` bytes of `bytes` only when both getters did (the stand-in's
// store and `kcache nvrtc-put`'s compile elsewhere keep outputs alike, so that they compare).
NvrtcOutput KeptNvrtcOutput(int size_result, uint64_t size, int result, const char* bytes);
// The outputs, in the stand-in's order (client/nvrtc/nvrtc_cache_abi.h KCACHE_NVRTC_*): PTX,
// CUBIN, LTO-IR, OptiX-IR, Tile-IR, the log.
inline constexpr size_t kNvrtcOutputCount = 6;
struct NvrtcOutcome {
  int result = 0;  // nvrtcCompileProgram's
  std::array<NvrtcOutput, kNvrtcOutputCount> outputs;
  // nvrtcGetLoweredName's answer for each name expression, in the call's order: (result, name).
  std::vector<std::pair<int, std::string>> lowered;
  bool operator==(const NvrtcOutcome&) const = default;
};
std::string EncodeNvrtcOutcome(const NvrtcOutcome& outcome);
// DataLoss when the bytes are not an outcome (a damaged or hostile entry), or one whose lowered
// names are not one per name expression (`name_expressions`).
absl::StatusOr<NvrtcOutcome> DecodeNvrtcOutcome(absl::string_view bytes, size_t name_expressions);

// Whether NVRTC options (or a variable's value, split at blanks) ask for -arch=native.
bool NamesNativeArch(const std::vector<std::string>& options);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_NVRTC_NVRTC_COMPILE_H_
