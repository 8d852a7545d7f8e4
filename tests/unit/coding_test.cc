// core/coding.h: the byte order every format writes, pinned, and reads that stop at the end.
#include "core/coding.h"

#include <gtest/gtest.h>

#include <string>

namespace kcache {
namespace {

TEST(CodingTest, FixedWidthIntegersAreLittleEndianAndRoundTrip) {
  std::string out;
  PutFixed32(out, 0x01020304u);
  PutFixed64(out, 0x1122334455667788ull);
  EXPECT_EQ(out, std::string("\x04\x03\x02\x01\x88\x77\x66\x55\x44\x33\x22\x11", 12));
  EXPECT_EQ(DecodeFixed32(out.data()), 0x01020304u);
  EXPECT_EQ(DecodeFixed64(out.data() + 4), 0x1122334455667788ull);
  for (uint64_t value : {uint64_t{0}, uint64_t{0xff}, uint64_t{0x80000000}, ~uint64_t{0}}) {
    char bytes[8];
    EncodeFixed64(bytes, value);
    EXPECT_EQ(DecodeFixed64(bytes), value);
    EncodeFixed32(bytes, static_cast<uint32_t>(value));
    EXPECT_EQ(DecodeFixed32(bytes), static_cast<uint32_t>(value));
  }
}

TEST(CodingTest, BigEndianSortsAsTheNumberDoes) {
  std::string a, b;
  PutBigEndian32(a, 12080);
  PutBigEndian32(b, 13000);
  EXPECT_EQ(a, std::string("\x00\x00\x2f\x30", 4));
  EXPECT_LT(a, b);
  EXPECT_EQ(DecodeBigEndian32(b.data()), 13000u);
}

TEST(CodingTest, GetStopsAtTheEndWithoutTakingAnything) {
  std::string out;
  PutFixed32(out, 7);
  absl::string_view in = out;
  uint64_t wide = 99;
  EXPECT_FALSE(GetFixed64(in, &wide));
  EXPECT_EQ(wide, 99u);
  EXPECT_EQ(in.size(), 4u);
  uint32_t narrow = 0;
  EXPECT_TRUE(GetFixed32(in, &narrow));
  EXPECT_EQ(narrow, 7u);
  EXPECT_TRUE(in.empty());
  EXPECT_FALSE(GetFixed32(in, &narrow));
}

}  // namespace
}  // namespace kcache
