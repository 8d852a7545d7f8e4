// What a compile read, as a launcher keys it: every process the compile ran is observed
// (engine/observe/: a preloaded library records each file opened, each path looked at and
// not found, each environment variable asked for), and an entry's manifest holds what was
// observed, so that a hit is a compile that would read the same things here. This is what
// makes options, environment variables and files nobody listed (a response file in an
// option's value, a ptxas options file, a variable nvcc.profile reads, an .incbin, a header
// created since in a directory searched first) part of the key without a rule naming them.
//
// docs/torch-extensions.md ("What a compile reads") says what is recorded, what is left out
// and why, and what makes a compile uncached.
#ifndef KCACHE_ENGINE_KEYS_OBSERVED_MANIFEST_H_
#define KCACHE_ENGINE_KEYS_OBSERVED_MANIFEST_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/compiler_command.h"
#include "engine/keys/compiler_tools.h"
#include "engine/keys/file_digests.h"
#include "engine/keys/header_manifest.h"
#include "engine/observe/observed_reads.h"

namespace kcache::objects {

// One observed run of a compile: a private directory (its TMPDIR: the compile's temporaries
// go there and are told apart from its inputs) holding the log the processes write.
// Move-only; the destructor removes the directory.
class Observation {
 public:
  // `library`: libkcache-observe.so (FindObserveLibrary); `skip`: real paths of programs whose
  // own reads are not recorded (kcache's launchers, run as a compile's host compiler).
  // Creates the directory under $TMPDIR (else /tmp).
  static absl::StatusOr<Observation> Begin(const std::string& library,
                                           const std::vector<std::string>& skip);
  Observation(Observation&& other) noexcept;
  Observation& operator=(Observation&&) = delete;
  Observation(const Observation&) = delete;
  ~Observation();

  // `base` (NAME=VALUE entries) with the observer's variables: LD_PRELOAD gets the library
  // first, KCACHE_OBSERVE_LOG and KCACHE_OBSERVE_SKIP are set, and TMPDIR is the directory.
  // LD_PRELOAD loses kcache's NVRTC and driver stand-ins (FindNvrtcStandIn, FindCudaStandIn):
  // compilers use neither, and a manifest names no library of kcache's own, which differs from
  // one kcache to another.
  std::vector<std::string> Environment(char** base) const;
  // Notes in the log that the compiler itself was started as `pid` (it must record its start).
  void NoteStarted(pid_t pid, const std::string& compiler) const;
  // What the processes recorded. ResourceExhausted past kMaxLogBytes (a compile that looked
  // at millions of distinct paths is not kept in memory to be keyed; it runs uncached).
  absl::StatusOr<observe::ObservedReads> Read() const;
  static constexpr uint64_t kMaxLogBytes = uint64_t{256} << 20;

  const std::string& temp_dir() const { return temp_dir_; }
  const std::string& library() const { return library_; }

 private:
  Observation(std::string temp_dir, std::string library, std::string skip);
  std::string temp_dir_;  // "" once moved from
  std::string library_;
  std::string skip_;
};

// libkcache-observe.so beside `binary` (the build tree) or in ../lib/kcache/ from its directory
// (an installed prefix); "" when there is none.
std::string FindObserveLibrary(const std::string& binary);

// kcache's NVRTC stand-in for NVRTC `major` (13 or 12; client/nvrtc, docs/nvrtc-standin.md),
// which `kcache run` preloads: nvrtc/libnvrtc.so.<major> beside `observe_library` (the build's
// client/cli/, or lib/kcache/ of an installed prefix); "" when there is none.
std::string FindNvrtcStandIn(const std::string& observe_library, int major = 13);
// kcache's libcuda.so.1 stand-in (client/cuda, docs/ptx-libraries.md), which `kcache run`
// preloads on a node with a driver: cuda/libcuda.so.1 beside `observe_library`; "" when there is
// none.
std::string FindCudaStandIn(const std::string& observe_library);

// What the manifest is made against.
struct ObservedCompile {
  const BaseDirs* dirs = nullptr;
  const Environment* env = nullptr;  // the launcher's environment (what a hit compares with)
  std::string temp_dir;              // Observation::temp_dir(): never an input
  std::string library;               // the preloaded library: never an input
  std::vector<std::string> outputs;  // the command's outputs (absolute): never inputs
  // Programs whose reads are a link's inputs, digested as the linker reads them
  // (DigestKind::kLinkInput): the linker and collect2.
  std::vector<std::string> linkers;
  // The command's own -march/-mcpu/-mtune=native is in its key by what it expands to here
  // (NativeExpansion, which runs the compiler as the command does, through any wrapper): a
  // program of the compile started with those is then keyed, not refused. nvcc's -arch=native
  // never is.
  bool host_native_keyed = false;
  // The reads are one process's own calls, recorded inside it (kcache's NVRTC stand-in,
  // client/nvrtc/nvrtc_reads.h), not processes observed from their start: none records a
  // start, and the clock, which NVRTC reads at every compile, is left out (whether it reaches
  // the output is found by compiling again under another date: client/cli/nvrtc_clock_probe.h).
  bool in_process = false;
  // Libraries a compile loads by name that its key1 holds instead of its manifest (NVRTC's
  // libcuda.so.1): their loads, and failures to load them, are left out. Any other library that
  // failed to load makes the compile uncached.
  std::vector<std::string> keyed_libraries;
};

// The manifest of what the compile read, every line checkable on another machine
// (ManifestMatches): files read by content (a program and the shared objects it loaded as
// kTool, a linker's inputs as kLinkInput), paths looked at by what was seen (absent, a type,
// a failure, a link's target, a realpath answer, a directory's listing), and environment
// variables a process read as the launcher's environment had them ("$NAME" lines; what a
// process of the compile set for another is not the caller's and is left out). Sorted, so the
// same reads give the same manifest (and entry id) in any run.
// FailedPrecondition, with *reason, when the compile cannot be keyed by what it read:
// kUnreadableInput (a program that ran unobserved, machine state read under /proc, /sys or /dev,
// a directory tree walked), kNativeTarget (a program started with -march=native or nvcc's
// -arch=native, or a variable read that holds one: NVCC_APPEND_FLAGS), kTimeMacros (a process read
// the clock, as a preprocessor does to expand __DATE__ and __TIME__; nvcc's cicc and cudafe++ read
// it for their own timing and are not counted), kInputChanged (an input changed at or after
// `compiled_from`, or a path found absent was read later), kUnreadableInput also for an input that
// cannot be read now.
absl::StatusOr<HeaderManifest> ObservedManifest(const observe::ObservedReads& reads,
                                                const ObservedCompile& compile,
                                                FileDigests& digests, absl::Time compiled_from,
                                                UncachedReason* reason);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_OBSERVED_MANIFEST_H_
