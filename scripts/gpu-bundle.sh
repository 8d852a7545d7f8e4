#!/usr/bin/env bash
# Packs what the GPU checks need into one tarball, for a GPU machine that has the CUDA toolkit,
# a driver and Python (torch, CuPy, cuda.core, pytest) but none of kcache's build dependencies
# (gRPC, RocksDB, Abseil…): the stripped binaries of BUILD and the shared libraries they load,
# less the C and C++ runtimes and libcuda. scripts/gpu-checks.sh unpacks and runs it there.
#
#   scripts/gpu-bundle.sh [BUILD] [OUT]     (defaults: build, .gpu; OUT/bundle.tar.xz, ~12 MB)
#
# The binaries carry their build tree's absolute paths (the compile worker's, KCACHE_SOURCE_DIR):
# gpu-checks.sh puts the tree at the same path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$root/.gpu}
binaries=(daemon/kcached client/cli/kcache client/cli/kcache-launch client/cli/libkcache-observe.so
          engine/workers/kcache-compile-worker
          examples/worker/kcache-example-worker client/lib/libkcache.so tests/kernels_gpu_test
          tests/node_gpu_test tests/ptx_library_gpu_test tests/cuda_load_program
          bench/kcache_bench_startup
          client/cli/nvrtc/libnvrtc.so.13 client/cli/nvrtc/libnvrtc.so.12
          client/cli/nvrtc/libkcache-nvrtc.so client/cli/cuda/libcuda.so.1
          client/cli/cuda/libkcache-cuda.so)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build" "$stage/lib"
for binary in "${binaries[@]}"; do
  mkdir -p "$stage/build/$(dirname "$binary")"
  strip -o "$stage/build/$binary" "$build/$binary"
done
# Every library the binaries load, by its soname, except what every Linux with a CUDA driver has.
for binary in "${binaries[@]}"; do ldd "$build/$binary"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  grep -Ev '^(libc|libm|libstdc\+\+|libgcc_s|libcuda|ld-linux-x86-64|libpthread|libdl|librt)\.so' |
  while read -r soname path; do cp -L "$path" "$stage/lib/$soname"; done
echo "$build" >"$stage/build-dir"
mkdir -p "$out"
tar -C "$stage" -cJf "$out/bundle.tar.xz" build lib build-dir
echo "gpu-bundle: $out/bundle.tar.xz ($(du -h "$out/bundle.tar.xz" | cut -f1)," \
  "$(ls "$stage/lib" | wc -l) libraries) for a tree at $build"
