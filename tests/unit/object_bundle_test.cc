// engine/objects/object_bundle.h: a bundle round-trips, and damaged or hostile bytes are
// refused.
#include "engine/objects/object_bundle.h"

#include <gtest/gtest.h>

#include <string>

namespace kcache::objects {
namespace {

TEST(BundleTest, RoundTripsAndRefusesDamage) {
  ObjectBundle bundle;
  bundle.object = std::string(
      "\x7f"
      "ELF\0\1",
      6);
  bundle.deps = DepFile{{"@cwd@/x.o"}, {"@cwd@/x.cu", "/usr/include/stdio.h"}};
  bundle.stderr_text = "warning: unused\n";
  bundle.exit_code = 0;
  std::string bytes = EncodeBundle(bundle);
  absl::StatusOr<ObjectBundle> back = DecodeBundle(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->object, bundle.object);
  EXPECT_EQ(back->deps.deps, bundle.deps.deps);
  EXPECT_EQ(back->stderr_text, bundle.stderr_text);
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_FALSE(DecodeBundle(bytes.substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(DecodeBundle(bytes + "x").ok());
  std::string huge_count = bytes;
  huge_count[6] = '\xff';  // the object's length, now far past the end
  EXPECT_FALSE(DecodeBundle(huge_count).ok());
}

}  // namespace
}  // namespace kcache::objects
