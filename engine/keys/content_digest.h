// A file's content digest, the part of FileDigest (file_digests.h) read from its bytes: XXH3-128
// of the whole file under 64 MiB, and from 64 MiB on a tree of 16 MiB chunks hashed on several
// threads (libtorch_cpu.so, 450 MB, is digested by a new pod's first Inductor link); and whether
// the text names __DATE__, __TIME__ or __TIMESTAMP__ (a compile that includes it depends on the
// clock).
#ifndef KCACHE_ENGINE_KEYS_CONTENT_DIGEST_H_
#define KCACHE_ENGINE_KEYS_CONTENT_DIGEST_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kcache::objects {

// The digest's hex digits of the regular file open as `fd`, `size` bytes long, and, when `scan`,
// whether it names a time macro. FailedPrecondition when it cannot be read whole (`path` names
// it in the message).
absl::StatusOr<std::pair<std::string, bool>> ContentDigest(int fd, uint64_t size,
                                                           const std::string& path, bool scan);

// Whether `text` names __DATE__, __TIME__ or __TIMESTAMP__ (FileDigest::has_time_macro's test).
bool NamesTimeMacro(absl::string_view text);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_CONTENT_DIGEST_H_
