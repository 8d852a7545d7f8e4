#!/usr/bin/env bash
# Installs every Debian 12 package kcache needs to build, test and benchmark.
# Idempotent: packages already present are left alone and apt is not touched.
# Runs apt-get directly as root, through sudo otherwise. The CUDA toolkit is not
# a Debian package: it is expected at $CUDA_HOME (default /usr/local/cuda).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  libxxhash-dev libssl-dev libzstd-dev libjemalloc-dev
  redis-server libhiredis-dev   # bench/serve compares against Redis on loopback
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all packages present"
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -e "$cuda_home/include/nvrtc.h" ]]; then
  echo "install-deps: no CUDA toolkit at $cuda_home (nvrtc.h missing)." >&2
  echo "  Install the CUDA 13 toolkit there, or set CUDA_HOME to its root." >&2
  exit 1
fi
