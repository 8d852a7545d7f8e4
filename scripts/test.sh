#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest; then the
# unit and integration tests under ASan + UBSan and the concurrency tests under TSan
# (scripts/sanitize.sh), and every fuzz target for a short, fixed time (scripts/fuzz.sh --ci).
# KCACHE_TEST_QUICK=1 stops after ctest (for local iteration; CI always runs everything).
# Arguments go to the first ctest. Tests that need a GPU skip (exit 125) without one.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# ccache, when installed, for every build below (CMake reads these at configure time): a CI
# machine that keeps its cache rebuilds the three trees in minutes. Paths under the clone are
# hashed relative to it and the working directory not at all, so a clone at another path hits
# what an earlier clone compiled; the clone's own paths are compiled into one file only
# (tests/testutil/tree_paths.cc), not into every test.
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi

# step NAME COMMAND...: runs it and says how long it took.
step() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "test: $name passed in $((SECONDS - start)) s"
}

step install-deps "$root/scripts/install-deps.sh"
step build "$root/scripts/build.sh"
# The kcache Python package (client/python) into the project's environment, built offline with
# the pinned scikit-build-core of requirements/test.txt; its build tree (build-python/) persists,
# so this rebuilds only what changed. tests/python also builds and installs it in a fresh venv.
step python-package "$root/scripts/venv-python" -m pip install -q --disable-pip-version-check \
  --no-build-isolation --no-deps "$root/client/python"
build=${KCACHE_BUILD_DIR:-$root/build}
step ctest ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@"
if [[ ${KCACHE_TEST_QUICK:-0} == 1 ]]; then
  echo "test: KCACHE_TEST_QUICK=1: sanitizer and fuzz steps skipped"
  exit 0
fi
step asan "$root/scripts/sanitize.sh" asan
step tsan "$root/scripts/sanitize.sh" tsan
step fuzz "$root/scripts/fuzz.sh" --ci
echo "test: everything passed in $SECONDS s"
