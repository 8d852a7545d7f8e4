#!/usr/bin/env bash
# Runs test suites under the sanitizers; scripts/test.sh calls it (docs/fuzzing.md,
# "Sanitizers"). Each build compiles only the test binaries it runs and the programs they start:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (the asan preset, build-asan/, Debug):
#         the unit tests and the integration tests but those in ASAN_SKIP below
#   tsan  ThreadSanitizer (the tsan preset, build-tsan/, Debug): the concurrency tests,
#         TSAN_TESTS below
# A report fails its test: every executable of a sanitizer build halts on the first one
# (cmake/sanitizers/default_options.cc; UBSan is built with -fno-sanitize-recover). Set
# ASAN_OPTIONS, UBSAN_OPTIONS or TSAN_OPTIONS to add options; they override those defaults.
#
#   scripts/sanitize.sh [asan] [tsan]     (default: both)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Slow under ASan and already covered by the ones that run: the full device x driver x store
# matrix of resolve (its cases go through the same code as resolver_test and daemon_test).
ASAN_SKIP=(resolve_matrix_test)
# The tests of what runs on many threads at once: single-flight compiles, the artifact cache
# and its tiers, the memory tier, the compile worker pool, libkcache (breaker, waits, many
# threads on one client, against a TSan-built kcached). Not daemon_test nor
# hostile_clients_test: Debian's gRPC is not built with TSan, and a reactor's state handed to
# gRPC (StartWrite) and read back in its callback (OnWriteDone) on another thread reads as a
# race; and TSan defers a signal that arrives on a thread blocked inside an uninstrumented
# library, so kcached under TSan does not stop on SIGTERM (docs/fuzzing.md, "Sanitizers").
TSAN_TESTS=(single_flight_test artifact_cache_test memory_lru_test process_pool_test client_test)
# Timing only: a 300 ms probe must reach a TSan-built kcached just resumed from SIGSTOP.
TSAN_SKIP='^ClientTest\.BreakerOpensOnStalledDaemonThenClosesWhenItAnswers$'

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# run_suite PRESET SKIP TEST...: configure (once), build those tests, run them but the test
# cases SKIP matches (a ctest -E regex; '' for none).
run_suite() {
  local preset=$1 skip=$2 build=$root/build-$1
  shift 2
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake --preset "$preset" "${launcher[@]}" >/dev/null
  fi
  # The tests' programs (kcached, kcache, the worker, the compile workers) come with them.
  cmake --build "$build" -j "$(nproc)" --target "$@"
  local labels
  labels=$(IFS='|'; echo "^($*)\$")
  echo "sanitize: $preset: running $# test binaries"
  ctest --test-dir "$build" -L "$labels" ${skip:+-E "$skip"} -j "$(nproc)" --output-on-failure
}

suites=("$@")
((${#suites[@]})) || suites=(asan tsan)
for suite in "${suites[@]}"; do
  case $suite in
    asan)
      tests=()
      for src in tests/unit/*_test.cc tests/integration/*_test.cc kernels/reference/*_test.cc; do
        name=$(basename "$src" .cc)
        [[ " ${ASAN_SKIP[*]} " == *" $name "* ]] || tests+=("$name")
      done
      run_suite asan "" "${tests[@]}"
      ;;
    tsan) run_suite tsan "$TSAN_SKIP" "${TSAN_TESTS[@]}" ;;
    *) echo "usage: $0 [asan] [tsan]" >&2; exit 2 ;;
  esac
done
