// A compile command's key, key1 (core/object_entry.h CommandKey), ccache "direct mode" style:
// SHA-256 over tagged fields: the compiler family, the keyed arguments (paths under the base
// directories written relative to them), the content digest of every tool the compile runs,
// the environment that changes output, the source's digest (and the working directory when
// the output holds debug paths). Under key1, entries each hold a header manifest
// (header_manifest.h); the compiler's preprocessed output is never keyed: nvcc preprocesses
// once per __CUDA_ARCH__, and one pass does not show what the others read.
#ifndef KCACHE_ENGINE_KEYS_COMMAND_KEY_H_
#define KCACHE_ENGINE_KEYS_COMMAND_KEY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler_command.h"
#include "core/object_entry.h"
#include "engine/keys/base_dirs.h"
#include "engine/keys/compiler_tools.h"
#include "engine/keys/file_digests.h"

namespace kcache::objects {

struct ObjectKey {
  CommandKey key1;
  std::vector<KeyField> fields;
  std::string source;  // normalized source path, for listings and explain
};

// key1 over `fields`: SHA-256 over `domain` (a kind of key's own: a command's, an NVRTC
// compile's), a NUL, then each field's name and value framed (AppendKeyFrame).
CommandKey KeyOverFields(absl::string_view domain, const std::vector<KeyField>& fields);

// Computes key1. FailedPrecondition (with UncachedReason kUnreadableInput or kTimeMacros in
// *reason) when a tool or the source cannot be read or the source names a time macro.
// `native_expansion`: what the command's -march=native (...) means on this machine
// (NativeExpansion); "" when it has none. A shared object also keys its kind and the link's
// environment (KeyedLinkEnvironment).
absl::StatusOr<ObjectKey> ComputeObjectKey(const CompilerCommand& command,
                                           const std::vector<ToolFile>& tools,
                                           const Environment& env, const BaseDirs& dirs,
                                           FileDigests& digests, UncachedReason* reason,
                                           const std::string& native_expansion = "");

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_COMMAND_KEY_H_
