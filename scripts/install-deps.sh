#!/usr/bin/env bash
# Installs every Debian 12 package kcache needs to build, test and benchmark, and the Python
# packages of its checks: a project-local virtual environment (.venv, or $KCACHE_VENV) filled
# from the pinned requirements/test.txt with pip from PyPI, then requirements/no-deps.txt with
# `pip install --no-deps` (never the system Python's site-packages; Debian's python3-venv makes
# the environment). What Debian packages well (yamllint, redis-server, the C++ libraries) stays
# a Debian package.
# Idempotent: packages already present are left alone and apt is not touched; pip runs only
# when the environment is missing or requirements/test.txt or no-deps.txt changed since it
# last ran (pip's own cache keeps what it downloaded).
# Runs apt-get directly as root, through sudo otherwise. The CUDA toolkit is not
# a Debian package: it is expected at $CUDA_HOME (default /usr/local/cuda).
#
#   scripts/install-deps.sh               everything (the README's commands, CI)
#   scripts/install-deps.sh --build-only  what compiling kcache needs, nothing for tests,
#                                         benchmarks or the deploy checks (deploy/Dockerfile,
#                                         which builds with -DKCACHE_BUILD_TESTS=OFF
#                                         -DKCACHE_BUILD_BENCH=OFF)
#   scripts/install-deps.sh --lock        after editing requirements/test.in: resolve it in a
#                                         scratch environment and rewrite requirements/test.txt
#                                         (no-deps.txt is pinned by hand: its packages' own
#                                         needs go into test.in)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${KCACHE_VENV:-$root/.venv}
lock=$root/requirements/test.txt
no_deps=$root/requirements/no-deps.txt
build_only=0 relock=0
case ${1:-} in
  "") ;;
  --build-only) build_only=1 ;;
  --lock) relock=1 ;;
  *) echo "usage: $0 [--build-only | --lock]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev
  libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  libxxhash-dev libssl-dev libzstd-dev libjemalloc-dev
  libseccomp-dev                # compile workers: seccomp filter (docs/compile-workers.md)
  libhiredis-dev                # the shared tier's Redis (Cluster) client (engine/shared)
  liblz4-dev                    # LZ4-compressed fatbin entries (engine/fatbin)
)
if ((!build_only)); then
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev
    redis-server redis-tools      # bench/serve; the shared tier's tests start a Redis Cluster
    yamllint                      # tests/deploy: lints deploy/**/*.yaml
    python3 python3-venv          # the project's virtual environment (.venv), below
    clang-format                  # tests/format: .clang-format enforced (clang-format 14)
    clang libclang-rt-14-dev      # tests/fuzz: libFuzzer targets (scripts/fuzz.sh, docs/fuzzing.md)
    ccache                        # bench/torch_ext: the peer kcache's launchers are measured against
  )
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

# The project's Python environment, from Debian's python3 (not whichever python3 is first on
# PATH: a pyenv or conda one may lack venv, or change under the project).
python=/usr/bin/python3
if ((relock)); then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  "$python" -m venv "$scratch/venv"
  "$scratch/venv/bin/pip" install -q --disable-pip-version-check -r "$root/requirements/test.in"
  {
    sed -n '1,/^$/p' "$lock" | grep '^#'
    "$scratch/venv/bin/pip" freeze --disable-pip-version-check | LC_ALL=C sort -f
  } >"$lock.new"
  mv "$lock.new" "$lock"
  echo "install-deps: wrote $lock"
  exit 0
fi
if ((!build_only)); then
  stamp=$venv/.kcache-requirements
  if [[ ! -x $venv/bin/python ]] || ! cat "$lock" "$no_deps" | cmp -s - "$stamp"; then
    echo "install-deps: filling the Python environment $venv from requirements/test.txt" \
      "and no-deps.txt"
    [[ -x $venv/bin/python ]] || "$python" -m venv "$venv"
    pip=("$venv/bin/pip" install -q --disable-pip-version-check --no-input)
    "${pip[@]}" -r "$lock"
    "${pip[@]}" --no-deps -r "$no_deps"
    cat "$lock" "$no_deps" >"$stamp"
  fi
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -e "$cuda_home/include/nvrtc.h" ]]; then
  echo "install-deps: no CUDA toolkit at $cuda_home (nvrtc.h missing)." >&2
  echo "  Install the CUDA 13 toolkit there, or set CUDA_HOME to its root." >&2
  exit 1
fi
