// core/xxh128.h: the fast digest of files in a launcher's key and of kernel specs a process
// recognises.
#include "core/xxh128.h"

#include <gtest/gtest.h>

#include <string>

namespace kcache {
namespace {

// xxhsum -H2's spelling of XXH3-128 (seed 0): the high half first.
TEST(Xxh128Test, KnownVectors) {
  EXPECT_EQ(Xxh128Hex(""), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(Xxh128Hex("abc"), "06b05ab6733a618578af5f94892f3950");
  EXPECT_EQ(Xxh128Of("").Hex().size(), 32u);
}

TEST(Xxh128Test, StreamingInPiecesIsTheOneShotDigest) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 7));
  Xxh128 hash;
  for (size_t at = 0; at < data.size(); at += 997) {
    hash.Update(absl::string_view(data).substr(at, 997));
  }
  EXPECT_EQ(hash.Finish(), Xxh128Of(data));
  EXPECT_NE(Xxh128Of(data), Xxh128Of(data.substr(1)));
}

}  // namespace
}  // namespace kcache
