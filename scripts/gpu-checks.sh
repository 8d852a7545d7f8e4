#!/usr/bin/env bash
# On a GPU machine: unpacks scripts/gpu-bundle.sh's tarball and runs the checks that need a GPU,
# each logged to LOGS/NAME.log, with one summary line each on stdout.
#
#   scripts/gpu-checks.sh BUNDLE LOGS [CHECK...]
#
# CHECKs (default: all, in this order):
#   gtest          tests/gpu: kernels_gpu_test, node_gpu_test, ptx_library_gpu_test (a PTX-only
#                  library through the driver stand-in: the driver's JIT, then served SASS)
#   python         tests/python test_gpu.py, test_gpus.py, test_triton_backend.py,
#                  test_nvrtc_gpu.py (pytest)
#   worker         the example worker through a kcached over a store warmed for this GPU: its
#                  first start after the daemon started, then three more, then two with the
#                  manifest baked by `kcache bake-manifest` (--json lines)
#   torch-compile  bench/torch_compile/bench.py --device cuda, with one local-warm and one new
#                  pod profiled into LOGS/torch-compile-profile (needs redis-py on PYTHONPATH;
#                  $KCACHE_BENCH_RUNS pods per warm row, default 2)
# The machine needs the CUDA toolkit at /usr/local/cuda, a driver, and python3 with pytest,
# cuda.core, CuPy, torch, transformers and Triton. Run as root: the bundle's libraries that the
# machine lacks are registered with ldconfig, because compile workers start with an empty
# environment (LD_LIBRARY_PATH does not reach them).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$1 logs=$2
shift 2
checks=("$@")
((${#checks[@]})) || checks=(gtest python worker torch-compile)
mkdir -p "$logs"

stage=$(mktemp -d)
tar -C "$stage" -xJf "$bundle" || exit 1
build=$(cat "$stage/build-dir")
tree=$(dirname "$build")
if [[ $tree != "$root" ]]; then
  if [[ -e $tree && $(readlink -f "$tree") != "$root" ]]; then
    echo "gpu-checks: $tree exists and is not this checkout; the bundle's binaries need it" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$tree")" && ln -sfn "$root" "$tree"
fi
mkdir -p "$build" && cp -a "$stage/build/." "$build/"
libs=/opt/kcache-gpu-libs
mkdir -p "$libs"
for lib in "$stage"/lib/*; do
  name=$(basename "$lib")
  ldconfig -p | grep -q "^[[:space:]]$name " || cp "$lib" "$libs/"
done
echo "$libs" >/etc/ld.so.conf.d/kcache-gpu.conf && ldconfig

export KCACHED=$build/daemon/kcached KCACHE_CLI=$build/client/cli/kcache
export KCACHE_EXAMPLE_WORKER=$build/examples/worker/kcache-example-worker
export KCACHE_LIBRARY=$build/client/lib/libkcache.so
export PYTHONPATH=$root/client/python/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
sm=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
echo "gpu-checks: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), SM $sm"

summary() {  # NAME RC: one line
  if (($2 == 0)); then echo "gpu-checks: $1: passed"; else echo "gpu-checks: $1: FAILED ($2)"; fi
}

run_gtest() {
  local rc=0 test
  for test in kernels_gpu_test node_gpu_test ptx_library_gpu_test; do
    "$build/tests/$test" >"$logs/$test.log" 2>&1
    local r=$?
    ((r == 0)) || rc=$r
    echo "  $test: exit $r, $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/$test.log" | tr '\n' ' ')"
  done
  return $rc
}

run_python() {
  # The one test that needs the project venv's NVRTC 12.9 wheel (a CUDA 12 cubin) is left out.
  (cd "$root/tests/python" &&
   python3 -m pytest -q test_gpu.py test_gpus.py test_triton_backend.py test_nvrtc_gpu.py \
     --deselect test_triton_backend.py::test_a_cubin_newer_than_the_told_driver_is_not_served) \
    >"$logs/python.log" 2>&1
  local r=$?
  echo "  $(tail -1 "$logs/python.log")"
  return $r
}

worker_line() {  # NAME JSON: total, phases and where the kernels came from, on one line
  python3 -c 'import json, sys, collections
r = json.loads(sys.argv[2])
print(sys.argv[1], "total", r["total_micros"], "us", r["phase_micros"],
      dict(collections.Counter(k["served_from"] for k in r["kernels"])))' "$1" "$2"
}

run_worker() {
  local tmp unsandboxed=()
  tmp=$(mktemp -d)
  if ! "$KCACHE_CLI" warm --store "$tmp/store" --arch "$sm" "$root/kernels/manifest.yaml" \
        >"$logs/worker.log" 2>&1; then
    unsandboxed=(--allow-unsandboxed-compiles)  # a kernel without Landlock or seccomp
    "$KCACHE_CLI" warm --store "$tmp/store" --arch "$sm" "${unsandboxed[@]}" \
      "$root/kernels/manifest.yaml" >>"$logs/worker.log" 2>&1 || return 1
  fi
  "$KCACHE_CLI" bake-manifest "$root/kernels/manifest.yaml" "$tmp/manifest.baked" \
    >>"$logs/worker.log" 2>&1
  "$KCACHED" --store "$tmp/store" --listen "unix://$tmp/kcache.sock" "${unsandboxed[@]}" \
    >>"$logs/worker.log" 2>&1 &
  local daemon=$! i
  for i in $(seq 100); do [[ -S $tmp/kcache.sock ]] && break; sleep 0.05; done
  local start report manifest
  for start in first next next next baked baked; do
    manifest=$root/kernels/manifest.yaml
    [[ $start == baked ]] && manifest=$tmp/manifest.baked
    report=$("$KCACHE_EXAMPLE_WORKER" --manifest "$manifest" --server "unix://$tmp/kcache.sock" \
               --json 2>>"$logs/worker.log")
    echo "$start: $report" >>"$logs/worker.log"
    echo "  $(worker_line "$start" "$report")"
  done
  kill "$daemon"; wait "$daemon"
}

run_torch_compile() {
  python3 "$root/bench/torch_compile/bench.py" --device cuda --runs "${KCACHE_BENCH_RUNS:-2}" \
    --kcache "$KCACHE_CLI" \
    --kcached "$KCACHED" --profile "$logs/torch-compile-profile" >"$logs/torch-compile.log" 2>&1
  local r=$?
  sed 's/^/  /' "$logs/torch-compile.log" | tail -12
  return $r
}

status=0
for check in "${checks[@]}"; do
  case $check in
    gtest) run_gtest ;;
    python) run_python ;;
    worker) run_worker ;;
    torch-compile) run_torch_compile ;;
    *) echo "gpu-checks: no check $check" >&2; false ;;
  esac
  r=$?
  summary "$check" $r
  ((r == 0)) || status=1
done
exit $status
