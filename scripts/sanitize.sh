#!/usr/bin/env bash
# Runs test suites under the sanitizers; scripts/test.sh calls it (docs/fuzzing.md,
# "Sanitizers"). Each build compiles only the test binaries it runs and the programs they start:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (the asan preset, build-asan/, Debug):
#         every unit and integration test
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

# The tests of what runs on many threads at once in one process: single-flight compiles, the
# artifact cache and its tiers, the memory tier, the compile worker pool, the write-behind, the
# background compiles. Not
# client_test, daemon_test nor hostile_clients_test: their kcached (and libkcache) run gRPC's
# callback API, and Debian's gRPC is not built with TSan, so a reactor's state handed to gRPC
# (StartWrite) and read back in its callback (OnWriteDone) on another thread reads as a race;
# and TSan
# defers a signal that arrives on a thread blocked inside an uninstrumented library, so
# kcached under TSan does not stop on SIGTERM (docs/fuzzing.md, "Sanitizers").
TSAN_TESTS=(single_flight_test artifact_cache_test memory_lru_test bounded_lru_test
  background_writer_test process_pool_test write_behind_test background_compiles_test
  memo_object_cache_test connection_server_test)

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# run_suite PRESET TEST...: configure (once), build those tests, run them.
run_suite() {
  local preset=$1 build=$root/build-$1
  shift
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake --preset "$preset" "${launcher[@]}" >/dev/null
  fi
  # The tests' programs (kcached, kcache, the worker, the compile workers) come with them.
  cmake --build "$build" -j "$(nproc)" --target "$@"
  local labels
  labels=$(IFS='|'; echo "^(hostile_)?($*)\$")
  echo "sanitize: $preset: running $# test binaries"
  ctest --test-dir "$build" -L "$labels" -j "$(nproc)" --output-on-failure && return 0
  # Failures that are only LeakSanitizer's tracer crashing at a process's exit (before any leak
  # is looked for) run again, up to 3 times, until a run of each gets as far as its leak check
  # and passes; any other failure, in the first run or a later one, fails the suite as it is
  # (scripts/lsan_tracer_crashes.py). One test that runs NVRTC in process crashed the tracer in
  # about 1 run of 6 here, twice in a row in one CI run.
  local crashed attempt
  for attempt in 1 2 3; do
    crashed=$(python3 "$root/scripts/lsan_tracer_crashes.py" "$build") || return 1
    echo "sanitize: $preset: LeakSanitizer's tracer crashed at a process's exit in tests" \
      "$crashed; again ($attempt of 3)"
    ctest --test-dir "$build" -I "0,0,0,$crashed" --output-on-failure && return 0
  done
  return 1
}

suites=("$@")
((${#suites[@]})) || suites=(asan tsan)
for suite in "${suites[@]}"; do
  case $suite in
    asan)
      tests=()
      for src in tests/unit/*_test.cc tests/integration/*_test.cc kernels/reference/*_test.cc; do
        tests+=("$(basename "$src" .cc)")
      done
      run_suite asan "${tests[@]}"
      ;;
    tsan) run_suite tsan "${TSAN_TESTS[@]}" ;;
    *) echo "usage: $0 [asan] [tsan]" >&2; exit 2 ;;
  esac
done
