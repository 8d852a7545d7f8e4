// MacroReach (engine/keys/macro_reach.h): a name written whole, pasted from pieces written
// anywhere, joined by a line splice (or a trigraph one where trigraphs are on) is reached; one
// only in a comment, or with a piece missing, is not.
#include "engine/keys/macro_reach.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kcache::objects {
namespace {

std::optional<std::string> ReachedBy(const std::vector<std::string>& texts,
                                     bool trigraphs = false) {
  MacroReach reach({"__FILE__", "__BASE_FILE__", "assert"}, trigraphs);
  for (const std::string& text : texts) reach.Add(text);
  return reach.Reached();
}

TEST(MacroReachTest, ReachedWrittenOrPastedFromPiecesAnywhere) {
  const std::vector<std::vector<std::string>> reaching = {
      {"int n = sizeof(__FILE__);"},
      {"const char* b = __BASE_FILE__;"},
      {"assert(x);"},
      {"#define CAT(a, b) a##b\n#define MK(a, b) CAT(a, b)\nint n = sizeof(MK(__FI, LE__));"},
      {"#define P __FI\n", "#define Q LE__\n", "MK(P, Q)"},              // across texts
      {"-DLEFT=__FIL", "int n = sizeof(_NV_CONCAT_EVAL1(LEFT, E__));"},  // an option's
      {"_ _ F I L E _ _"},                                               // one letter each
      {"ass ert"},
      {"int n = sizeof(__FI\\\nLE__);"},       // a line splice
      {"int n = sizeof(__FILE\\\n__);"},       // one that leaves no piece whole but the name
      {"int n = sizeof(__FI\\\r\nLE__);"},     // CR LF
      {"puts(\"__FILE__\");"},                 // in a string: _Pragma makes it tokens
      {"R\"x(// not a comment)x\" __FILE__"},  // a raw string: every word counts
      {"// a raw string R\"(\n__FILE__ )\""},
  };
  for (const std::vector<std::string>& texts : reaching) {
    EXPECT_TRUE(ReachedBy(texts).has_value()) << texts[0];
  }
  EXPECT_EQ(*ReachedBy({"#define MK(a, b) a##b\nMK(__FI, LE__)"}),
            "could paste __FILE__ from __FI + LE__");
  EXPECT_EQ(*ReachedBy({"x = __FILE__;"}), "spells __FILE__");
}

TEST(MacroReachTest, TrigraphSplicesWhereTrigraphsAreOn) {
  std::string text = "int n = sizeof(__FILE?\?/\n__);";
  EXPECT_EQ(ReachedBy({text}, true), "spells __FILE__");
  // C++17: no splice, yet the two sides are pieces of the name.
  EXPECT_EQ(ReachedBy({text}, false), "could paste __FILE__ from __FILE + __");
  EXPECT_TRUE(TrigraphsOn({"-std=c++11"}));
  EXPECT_TRUE(TrigraphsOn({"--std", "c++14"}));
  EXPECT_FALSE(TrigraphsOn({"-std=c++17"}));
  EXPECT_FALSE(TrigraphsOn({}));
}

TEST(MacroReachTest, NotReachedFromCommentsNumbersOrWithAPieceMissing) {
  const std::vector<std::vector<std::string>> not_reaching = {
      {"extern \"C\" __global__ void k(float* out) { out[0] = 1.0f; }"},
      {"// __FILE__ assert\n/* __BASE_FILE__ */ int x;"},
      {"#define CAT(a, b) a##b\nCAT(__FI, LX__)"},  // no LE__ nor its pieces
      {"int n = 0x__FILE__;"},                      // a pp-number
      {"int n = 1'000; // __FILE__"},               // a digit separator opens no literal
      {"x = X__FILE__Y;"},                          // a longer identifier
  };
  for (const std::vector<std::string>& texts : not_reaching) {
    std::optional<std::string> why = ReachedBy(texts);
    EXPECT_FALSE(why.has_value()) << texts[0] << ": " << why.value_or("");
  }
}

}  // namespace
}  // namespace kcache::objects
