// The built-in cache directory table's rows for tests (engine/cache_dirs/cache_dir_table.h).
#ifndef KCACHE_TESTS_TESTUTIL_CACHE_DIRS_H_
#define KCACHE_TESTS_TESTUTIL_CACHE_DIRS_H_

#include <gtest/gtest.h>

#include <string>

#include "engine/cache_dirs/cache_dir_table.h"

namespace kcache::testing {

// The row `name`; a test failure and an empty row when the table has none.
inline const cache_dirs::CacheDirSpec& KnownRow(const std::string& name) {
  static const cache_dirs::CacheDirSpec none;
  const cache_dirs::CacheDirSpec* spec = cache_dirs::FindKnownCacheDir(name);
  EXPECT_NE(spec, nullptr) << "no row " << name;
  return spec != nullptr ? *spec : none;
}

}  // namespace kcache::testing

#endif  // KCACHE_TESTS_TESTUTIL_CACHE_DIRS_H_
