#!/usr/bin/env bash
# Installs what kcache's installed binaries need at run time on Debian 12, and nothing to build
# with: the shared libraries that kcached, kcache, kcache-compile-worker, kcache-example-worker
# and libkcache.so link (Debian runtime packages, never -dev), and the CUDA packages that NVRTC
# compiles need (libnvrtc + its builtins, libnvJitLink, and the headers the kernels include:
# cuda_fp16.h & co. and CCCL). This is the one list: deploy/Dockerfile's runtime stage runs
# this script, and tests/deploy/image_runtime_deps.sh fails when a binary links a library whose
# package is not here.
#
#   install-runtime-deps.sh                    Debian runtime libraries + CUDA runtime packages
#   install-runtime-deps.sh --cuda-only        only the CUDA packages
#   install-runtime-deps.sh --cuda-only --dev  CUDA packages + nvrtc.h/nvJitLink.h (build stage)
#   install-runtime-deps.sh --print [...]      print the package names, one a line; install nothing
#
# The CUDA packages come from NVIDIA's apt repository (the cuda-keyring package must already be
# installed; deploy/Dockerfile does that). CUDA_VERSION (default 13.0) picks the package series
# (cuda-nvrtc-13-0 ...); CUDA_NVRTC_VERSION, CUDA_NVJITLINK_VERSION, CUDA_CUDART_VERSION and
# CUDA_CCCL_VERSION, when set, pin the package versions (apt's "name=version"). Idempotent;
# apt-get as root, through sudo otherwise.
set -euo pipefail

# Debian 12 runtime libraries (ldd of every installed binary, mapped to packages). libc6 and
# libgcc-s1 are left out: every debian:12 image has them (dpkg and apt depend on them).
debian_packages=(
  libstdc++6
  libabsl20220623                       # Abseil
  libgrpc++1.51 libgrpc29 libc-ares2 libre2-9 libprotobuf32   # gRPC, protobuf
  librocksdb7.8 libsnappy1v5 liblz4-1 libbz2-1.0 zlib1g libgflags2.2 libzstd1   # RocksDB
  libssl3                               # OpenSSL libcrypto (kernel ids, toolkit identity)
  libyaml-cpp0.7 libxxhash0 libspdlog1.10 libfmt9 libjemalloc2
  libseccomp2                           # the compile workers' syscall filter
  libhiredis0.14                        # the shared tier (Redis Cluster client)
)

cuda_version=${CUDA_VERSION:-13.0}
suffix=${cuda_version/./-}
# name, pin variable. cuda-nvrtc ships libnvrtc.so.13 and libnvrtc-builtins.so.13.0;
# libnvjitlink ships libnvJitLink.so.13; cuda-cudart-dev ships cuda_fp16.h, cuda_bf16.h,
# cuda_fp8.h (NVRTC compiles include them); cuda-cccl ships include/cccl (cub, cuda/std, nv/).
cuda_runtime=(
  "cuda-nvrtc-$suffix CUDA_NVRTC_VERSION"
  "libnvjitlink-$suffix CUDA_NVJITLINK_VERSION"
  "cuda-cudart-dev-$suffix CUDA_CUDART_VERSION"
  "cuda-cccl-$suffix CUDA_CCCL_VERSION"
)
# Build only: the API headers kcache compiles against (cmake/Dependencies.cmake).
cuda_dev=(
  "cuda-nvrtc-dev-$suffix CUDA_NVRTC_VERSION"
  "libnvjitlink-dev-$suffix CUDA_NVJITLINK_VERSION"
)

print=0 cuda_only=0 dev=0
for arg in "$@"; do
  case $arg in
    --print) print=1 ;;
    --cuda-only) cuda_only=1 ;;
    --dev) dev=1 ;;
    *) echo "install-runtime-deps: unknown argument $arg (see the header of $0)" >&2; exit 2 ;;
  esac
done

specs=()   # what apt-get install gets: name or name=version
names=()   # package names only
if ((!cuda_only)); then
  specs+=("${debian_packages[@]}")
  names+=("${debian_packages[@]}")
fi
cuda=("${cuda_runtime[@]}")
((dev)) && cuda+=("${cuda_dev[@]}")
for entry in "${cuda[@]}"; do
  read -r name pin_var <<<"$entry"
  names+=("$name")
  if [[ -n ${!pin_var:-} ]]; then specs+=("$name=${!pin_var}"); else specs+=("$name"); fi
done

if ((print)); then
  printf '%s\n' "${names[@]}"
  exit 0
fi

missing=()
for spec in "${specs[@]}"; do
  name=${spec%%=*}
  want=${spec#"$name"}; want=${want#=}
  have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
  if [[ $have != "install ok installed "* ]] || [[ -n $want && ${have##* } != "$want" ]]; then
    missing+=("$spec")
  fi
done

if ((${#missing[@]})); then
  echo "install-runtime-deps: installing ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-runtime-deps: all packages present"
fi

# NVIDIA's packages put files under <root>/targets/<arch>-linux/{include,lib}; kcache looks for
# headers in <root>/include (and <root>/include/cccl), so make sure the usual links exist.
root=/usr/local/cuda-$cuda_version
if [[ -d $root/targets ]]; then
  if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
  for target in "$root"/targets/*-linux; do
    [[ -e $root/include || ! -d $target/include ]] || "${sudo[@]}" ln -s "${target#"$root"/}/include" "$root/include"
    [[ -e $root/lib64 || ! -d $target/lib ]] || "${sudo[@]}" ln -s "${target#"$root"/}/lib" "$root/lib64"
  done
fi
