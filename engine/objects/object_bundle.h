// An object entry's payload, the bundle: what a compile produced (the object, its dependency
// file, its output and exit code), and its byte format (docs/store-format.md, "Object entries").
#ifndef KCACHE_ENGINE_OBJECTS_OBJECT_BUNDLE_H_
#define KCACHE_ENGINE_OBJECTS_OBJECT_BUNDLE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/keys/dep_file.h"

namespace kcache::objects {

// What a compile produced, paths normalized (BaseDirs): replayed on a hit. A named value
// (named_object.h) is a bundle too: the value as its object, the name as its only target.
struct ObjectBundle {
  std::string object;  // the -o file's bytes
  DepFile deps;        // the dependency file, targets and prerequisites
  std::string stdout_text, stderr_text;
  int exit_code = 0;
};
// The same, decoded in place: its views point into the bytes decoded, which must outlive it
// (a hit writes the object straight from kcached's fast-path arena).
struct ObjectBundleView {
  absl::string_view object;
  DepFile deps;
  absl::string_view stdout_text, stderr_text;
  int exit_code = 0;
};
std::string EncodeBundle(const ObjectBundle& bundle);
// One string framed as a bundle frames each of its fields: u64le(byte length) + the bytes
// (docs/store-format.md). The NVRTC outcome (nvrtc_compile.h) and a handed entry
// (object_wire.h) frame theirs the same way.
void PutFramed(std::string& out, absl::string_view bytes);
// Takes one framed string off the front of `in` (a view into it); false when `in` is cut short.
bool TakeFramed(absl::string_view& in, absl::string_view* bytes);
// DataLoss when the bytes are not a bundle (a damaged or hostile entry).
absl::StatusOr<ObjectBundleView> DecodeBundleView(absl::string_view bytes);
absl::StatusOr<ObjectBundle> DecodeBundle(absl::string_view bytes);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_OBJECTS_OBJECT_BUNDLE_H_
