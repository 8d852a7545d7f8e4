// core/sha256.h: the digest every key of kcache is made with.
#include "core/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace kcache {
namespace {

TEST(Sha256Test, KnownVectors) {  // FIPS 180-2's examples
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, StreamingInPiecesIsTheOneShotDigest) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 7));
  Sha256 sha;
  for (size_t at = 0; at < data.size(); at += 997)
    sha.Update(absl::string_view(data).substr(at, 997));
  EXPECT_EQ(sha.Finish(), Sha256Of(data));
  EXPECT_NE(Sha256Of(data), Sha256Of(data.substr(1)));
}

}  // namespace
}  // namespace kcache
