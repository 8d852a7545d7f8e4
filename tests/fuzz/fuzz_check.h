// What every fuzz target of tests/fuzz checks beyond "does not crash": FUZZ_CHECK(condition,
// what) prints the broken property and aborts, which libFuzzer (and the replay driver) report
// as a crash with the input that caused it.
#ifndef KCACHE_TESTS_FUZZ_FUZZ_CHECK_H_
#define KCACHE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(condition, what)                                                              \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, __LINE__, #condition, \
                   std::string(what).c_str());                                                   \
      std::abort();                                                                              \
    }                                                                                            \
  } while (false)

#endif  // KCACHE_TESTS_FUZZ_FUZZ_CHECK_H_
