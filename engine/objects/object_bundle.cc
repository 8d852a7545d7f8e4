// The bundle's byte format: encoding and decoding a compile's outputs.
#include "engine/objects/object_bundle.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/coding.h"

namespace kcache::objects {
namespace {

constexpr char kBundleMagic[] = "KCOBJ1";
// More strings than any real dependency file lists: a bound on what a hostile entry makes us
// allocate.
constexpr uint32_t kMaxBundleStrings = 1 << 20;

bool TakeString(absl::string_view& in, std::string* text) {
  absl::string_view view;
  if (!TakeFramed(in, &view)) return false;
  *text = std::string(view);
  return true;
}

bool TakeList(absl::string_view& in, std::vector<std::string>* list) {
  std::string count_text;
  if (!TakeString(in, &count_text)) return false;
  uint32_t count = 0;
  if (!absl::SimpleAtoi(count_text, &count) || count > kMaxBundleStrings) return false;
  list->resize(count);
  for (std::string& item : *list) {
    if (!TakeString(in, &item)) return false;
  }
  return true;
}

void PutList(std::string& out, const std::vector<std::string>& list) {
  PutFramed(out, absl::StrCat(list.size()));
  for (const std::string& item : list) PutFramed(out, item);
}

}  // namespace

void PutFramed(std::string& out, absl::string_view bytes) {
  PutFixed64(out, bytes.size());
  absl::StrAppend(&out, bytes);
}

bool TakeFramed(absl::string_view& in, absl::string_view* bytes) {
  uint64_t size = 0;
  if (!GetFixed64(in, &size) || size > in.size()) return false;
  *bytes = in.substr(0, size);
  in.remove_prefix(size);
  return true;
}

std::string EncodeBundle(const ObjectBundle& bundle) {
  std::string out = kBundleMagic;
  PutFramed(out, bundle.object);
  PutList(out, bundle.deps.targets);
  PutList(out, bundle.deps.deps);
  PutFramed(out, bundle.stdout_text);
  PutFramed(out, bundle.stderr_text);
  PutFramed(out, absl::StrCat(bundle.exit_code));
  return out;
}

absl::StatusOr<ObjectBundleView> DecodeBundleView(absl::string_view bytes) {
  absl::string_view in = bytes;
  ObjectBundleView bundle;
  absl::string_view exit_text;
  bool ok = absl::ConsumePrefix(&in, kBundleMagic) && TakeFramed(in, &bundle.object) &&
            TakeList(in, &bundle.deps.targets) && TakeList(in, &bundle.deps.deps) &&
            TakeFramed(in, &bundle.stdout_text) && TakeFramed(in, &bundle.stderr_text) &&
            TakeFramed(in, &exit_text) && absl::SimpleAtoi(exit_text, &bundle.exit_code) &&
            in.empty();
  if (!ok) return absl::DataLossError("stored compiler output is not a kcache object bundle");
  return bundle;
}

absl::StatusOr<ObjectBundle> DecodeBundle(absl::string_view bytes) {
  absl::StatusOr<ObjectBundleView> view = DecodeBundleView(bytes);
  if (!view.ok()) return view.status();
  ObjectBundle bundle;
  bundle.object = std::string(view->object);
  bundle.deps = std::move(view->deps);
  bundle.stdout_text = std::string(view->stdout_text);
  bundle.stderr_text = std::string(view->stderr_text);
  bundle.exit_code = view->exit_code;
  return bundle;
}

}  // namespace kcache::objects
