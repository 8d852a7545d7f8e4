#!/usr/bin/env bash
# What a call forwarded by kcache's libcuda.so.1 stand-in costs: the same driver function called
# in a loop, in front of the tests' fake driver (tests/cuda/fake_libcuda_every.c, whose functions
# return at once, so that the stand-in's jump is all there is to see) with the stand-in preloaded
# and without, in one run; each pass 3 times, the fastest kept. A real driver's calls take
# hundreds of nanoseconds and more, so the difference per call is the figure to read.
#
#   bench/cuda_standin/bench.sh [BUILD_DIR] [CALLS]     (default build/, 20000000)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
calls=${2:-20000000}
program=$build/tests/cuda_symbols_program
fake=$build/tests/fake-cuda-every
stand_in=$build/client/cli/cuda/libcuda.so.1
for f in "$program" "$fake/libcuda.so.1" "$stand_in"; do
  [[ -e $f ]] || { echo "bench: $f is missing: build the tree first (scripts/build.sh)" >&2; exit 2; }
done
best() {  # fastest ns/call of 3 runs of: env ASSIGNMENTS... program calls N cuCtxSynchronize
  local fastest=""
  for _ in 1 2 3; do
    ns=$(env -u LD_PRELOAD LD_LIBRARY_PATH="$fake" "$@" "$program" calls "$calls" cuCtxSynchronize |
      awk '{print $4}')
    if [[ -z $fastest ]] || awk -v a="$ns" -v b="$fastest" 'BEGIN{exit !(a<b)}'; then fastest=$ns; fi
  done
  echo "$fastest"
}
alone=$(best)
through=$(best KCACHE_CUDA_CACHE=0 LD_PRELOAD="$stand_in" KCACHE_REAL_LIBCUDA="$fake/libcuda.so.1")
echo "cuCtxSynchronize, $calls calls, fastest of 3, fake driver:"
echo "  driver alone:         $alone ns/call"
echo "  through the stand-in: $through ns/call"
awk -v a="$alone" -v t="$through" \
  'BEGIN{printf "  the stand-in adds %.2f ns a call (%.2fx the fake'"'"'s empty call)\n", t-a, t/a}'
