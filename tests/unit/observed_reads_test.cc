// Reading an observed compile's log back (engine/observe/observed_reads.h): records of every
// kind, escapes, damaged lines, and programs started that never recorded their start.
#include "engine/observe/observed_reads.h"

#include <gtest/gtest.h>

#include "engine/observe/observe_log.h"

namespace kcache::observe {
namespace {

TEST(ParseObservationTest, ReadsEveryKindOfRecord) {
  ObservedReads reads = ParseObservation(
      "S 10 1\t/usr/bin/gcc\n"
      "B 10 /lib/libc.so.6\n"
      "R 10 /src/a\\nb.h\n"  // a newline in a name, escaped
      "W 10 /out/x.o\n"
      "X 10 /usr/include\n"
      "K 10 /usr/lib\n"
      "A 10 /inc/none/h.h\n"
      "F 10 13\t/secret\n"
      "D 10 /dir\n"
      "L 10 /bin/cc\tgcc\n"
      "P 10 /a/../b\t/b\n"
      "G 10 CPATH=/x=y\n"
      "g 10 SOURCE_DATE_EPOCH\n"
      "T 10 \n"
      "U 10 /bin/static\tstatically linked\n");
  EXPECT_EQ(reads.damaged_lines, 0u);
  EXPECT_EQ(reads.processes.at(10), "/usr/bin/gcc");
  ASSERT_EQ(reads.facts.size(), 9u);
  EXPECT_EQ(reads.facts[1].kind, KCACHE_OBSERVE_READ);
  EXPECT_EQ(reads.facts[1].path, "/src/a\nb.h");
  EXPECT_EQ(reads.facts[5].value, "13");
  EXPECT_EQ(reads.facts[5].path, "/secret");
  EXPECT_EQ(reads.facts[7].value, "gcc");
  EXPECT_TRUE(reads.written.contains("/out/x.o"));
  ASSERT_EQ(reads.env.size(), 2u);
  EXPECT_EQ(reads.env[0].name, "CPATH");
  EXPECT_EQ(reads.env[0].value, "/x=y");
  EXPECT_FALSE(reads.env[1].value.has_value());
  EXPECT_EQ(reads.clock_readers, std::vector<pid_t>{10});
  ASSERT_EQ(reads.unobservable.size(), 1u);
  EXPECT_EQ(reads.unobservable[0].second, "statically linked");
}

TEST(ParseObservationTest, DamagedLinesAreCountedNotBelieved) {
  ObservedReads reads = ParseObservation("R\nR x /a\nQ 3 /a\nR 0 /a\nG 4 NOEQUALS\nR 5 /ok\n");
  EXPECT_EQ(reads.damaged_lines, 5u);
  ASSERT_EQ(reads.facts.size(), 1u);
  EXPECT_EQ(reads.facts[0].path, "/ok");
}

// A process replacing itself must record the new program's start after its exec record, or
// the exec's failure; a spawned child (another pid) must record its start at all.
TEST(ParseObservationTest, ProgramsThatNeverRecordedTheirStartAreListed) {
  ObservedReads ran = ParseObservation(
      "S 10 1\t/bin/sh\n"
      "x 10 10\t/usr/bin/gcc\n"  // exec in place ...
      "S 10 1\t/usr/bin/gcc\n"   // ... recorded by gcc itself
      "x 10 11\t/usr/bin/as\n"   // spawned
      "S 11 10\t/usr/bin/as\n"
      "x 10 10\t/opt/missing\n"  // an exec that failed
      "A 10 /opt/missing\n");
  EXPECT_TRUE(ran.unstarted.empty());
  ObservedReads escaped = ParseObservation(
      "S 10 1\t/bin/sh\n"
      "x 10 10\t/opt/static-cc\n"  // the shell's own start came before: it does not count
      "x 10 12\t/opt/other\n");    // no start under 12
  ASSERT_EQ(escaped.unstarted.size(), 2u);
  EXPECT_EQ(escaped.unstarted[0].second, "/opt/static-cc");
  EXPECT_EQ(escaped.unstarted[1].first, 12);
}

}  // namespace
}  // namespace kcache::observe
