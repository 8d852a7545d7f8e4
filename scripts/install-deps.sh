#!/usr/bin/env bash
# Installs every Debian 12 package kcache needs to build, test and benchmark, and the node
# modules of the deploy/ checks (deploy/tools, pinned by its package-lock.json).
# Idempotent: packages already present are left alone and apt is not touched; npm runs only
# when deploy/tools/node_modules is missing or older than package-lock.json.
# Runs apt-get directly as root, through sudo otherwise. The CUDA toolkit is not
# a Debian package: it is expected at $CUDA_HOME (default /usr/local/cuda).
#
#   scripts/install-deps.sh               everything (the README's commands, CI)
#   scripts/install-deps.sh --build-only  what compiling kcache needs, nothing for tests,
#                                         benchmarks or the deploy checks (deploy/Dockerfile,
#                                         which builds with -DKCACHE_BUILD_TESTS=OFF
#                                         -DKCACHE_BUILD_BENCH=OFF)
set -euo pipefail

build_only=0
case ${1:-} in
  "") ;;
  --build-only) build_only=1 ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev
  libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  libxxhash-dev libssl-dev libzstd-dev libjemalloc-dev
)
if ((!build_only)); then
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev
    redis-server libhiredis-dev   # bench/serve compares against Redis on loopback
    yamllint                      # tests/deploy: lints deploy/**/*.yaml
  )
  # tests/deploy runs deploy/tools with Node.js >= 18 (Debian 12: 18) and npm. A node or npm
  # already on PATH (e.g. a newer Node.js with its own npm) is used as it is.
  command -v node >/dev/null 2>&1 || packages+=(nodejs)
  command -v npm >/dev/null 2>&1 || packages+=(npm)
fi

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

if ((!build_only)); then
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  if ((node_major < 18)); then
    echo "install-deps: node $(node --version) is too old for deploy/tools (Node.js >= 18 needed)." >&2
    exit 1
  fi
  tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deploy/tools
  if [[ ! -f "$tools/node_modules/.package-lock.json" ||
        "$tools/package-lock.json" -nt "$tools/node_modules/.package-lock.json" ]]; then
    echo "install-deps: installing deploy/tools' node modules (npm ci)"
    npm ci --prefix "$tools" --no-audit --no-fund --loglevel=error >/dev/null
  fi
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -e "$cuda_home/include/nvrtc.h" ]]; then
  echo "install-deps: no CUDA toolkit at $cuda_home (nvrtc.h missing)." >&2
  echo "  Install the CUDA 13 toolkit there, or set CUDA_HOME to its root." >&2
  exit 1
fi
