#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (the fuzz preset: clang, ASan + UBSan, build-fuzz/;
# only the targets and the libraries they link) and runs them (docs/fuzzing.md).
#
#   scripts/fuzz.sh [--seconds N] [TARGET...]   each TARGET (default: all) for N seconds
#                                               (default 300), one after the other
#   scripts/fuzz.sh --ci                        what scripts/test.sh runs: each target for
#                                               $KCACHE_FUZZ_SECONDS (20), nproc at a time
#   ctest --preset fuzz                         the same through ctest (fuzz.<target>)
#
# Targets: manifest value_format request compile_options cubin resp elf_link_interface. Each
# starts from its seeds in tests/fuzz/corpus/<target>/ and from what earlier runs found, kept in
# build-fuzz/tests/fuzz/corpus/<target>/. A crash is written to
# build-fuzz/tests/fuzz/crashes/<target>/ and fails the run; docs/fuzzing.md says how to turn it
# into a regression test. Prints, per target, the inputs run and the corpus size; the full
# output is in build-fuzz/tests/fuzz/logs/<target>.log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-fuzz
all_targets=(manifest value_format request compile_options cubin resp elf_link_interface)
seconds=300 ci=0 parallel=1 targets=()
while (($#)); do
  case $1 in
    --ci) ci=1 ;;
    --seconds) seconds=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1 (see $0 --help)" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
((${#targets[@]})) || targets=("${all_targets[@]}")

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f $build/CMakeCache.txt ]]; then
  (cd "$root" && cmake --preset fuzz "${launcher[@]}" >/dev/null)
fi
cmake --build "$build" -j "$(nproc)" --target kcache_fuzzers

# run_one TARGET SECONDS: runs it, its output in logs/TARGET.log; prints a line of figures.
run_one() {
  local t=$1 secs=$2 work=$build/tests/fuzz/corpus/$1 crashes=$build/tests/fuzz/crashes/$1
  local log=$build/tests/fuzz/logs/$1.log runs corpus
  mkdir -p "$work" "$crashes" "$build/tests/fuzz/logs"
  if ! "$build/tests/fuzz/${t}_fuzzer" -max_total_time="$secs" -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "$root/tests/fuzz/corpus/$t" \
    >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz: $t FAILED: the input is in $crashes/ (docs/fuzzing.md: keep it as a regression)" >&2
    return 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(grep -oE 'corp: [0-9]+' "$log" | tail -1 | sed 's/corp: //')
  echo "fuzz: $t: ${runs:-?} inputs in ${secs} s, corpus ${corpus:-?} inputs, no crash"
}

if ((ci)); then
  seconds=${KCACHE_FUZZ_SECONDS:-20}
  parallel=$(nproc)
fi
failed=0
if ((ci)) && ((parallel > 1)); then
  for t in "${targets[@]}"; do
    while (($(jobs -rp | wc -l) >= parallel)); do wait -n || failed=1; done
    run_one "$t" "$seconds" &
  done
  while (($(jobs -rp | wc -l) > 0)); do wait -n || failed=1; done
else
  for t in "${targets[@]}"; do
    echo "fuzz: $t for $seconds s"
    run_one "$t" "$seconds" || failed=1
  done
fi
exit $failed
