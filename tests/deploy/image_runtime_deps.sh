#!/usr/bin/env bash
# Fails when the runtime image (deploy/Dockerfile's runtime stage) would miss a library: every
# shared library that an installed binary links must come from a package that
# scripts/install-runtime-deps.sh installs (or from libc6 / libgcc-s1, which every debian:12
# image has), and the CUDA packages in that list must be the ones that ship the NVRTC and
# nvJitLink libraries kcache dlopens from the toolkit it was built and tested against.
#
#   image_runtime_deps.sh BUILD_DIR SOURCE_DIR [CUDA_ROOT]
#
# BUILD_DIR is installed (`cmake --install`) into a temporary prefix; what is checked is what
# the image copies. CUDA_ROOT defaults to $CUDA_HOME, else /usr/local/cuda.
set -euo pipefail
build=${1:?usage: image_runtime_deps.sh BUILD_DIR SOURCE_DIR [CUDA_ROOT]}
source_dir=${2:?usage: image_runtime_deps.sh BUILD_DIR SOURCE_DIR [CUDA_ROOT]}
cuda_root=${3:-${CUDA_HOME:-/usr/local/cuda}}
list_script=${KCACHE_RUNTIME_DEPS_SCRIPT:-$source_dir/scripts/install-runtime-deps.sh}

work=$(mktemp -d /tmp/kcache-image-deps.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || {
  cat "$work/install.log" >&2; echo "FAIL: cmake --install $build failed" >&2; exit 1; }

mapfile -t listed < <(env -u CUDA_VERSION "$list_script" --print)
in_list() { local p; for p in "${listed[@]}"; do [[ $p == "$1" ]] && return 0; done; return 1; }
base_image=(libc6 libgcc-s1)   # in every debian:12 image (dpkg and apt depend on them)
in_base() { local p; for p in "${base_image[@]}"; do [[ $p == "$1" ]] && return 0; done; return 1; }

# Which package owns each file: one dpkg-query for many paths (it reads every file list once).
# dpkg records /lib/... or /usr/lib/... (merged /usr), and the soname link or its target, so
# each library is asked under all of those names. Output: "pkg[:arch][, pkg2]: /path".
declare -A owner_of=()
lookup_owners() {
  local cands=() p real line pkgs path
  for p in "$@"; do
    real=$(readlink -f "$p")
    cands+=("$p" "$real" "${p#/usr}" "/usr${p#/usr}" "${real#/usr}" "/usr${real#/usr}")
  done
  while IFS= read -r line; do
    [[ $line == *": /"* && $line != diversion* ]] || continue
    pkgs=${line%%: /*}; path=/${line#*: /}
    pkgs=${pkgs%%,*}; owner_of[$path]=${pkgs%%:*}
  done < <(dpkg-query -S "${cands[@]}" 2>/dev/null || true)
}
owner() {   # prints the owner of a library looked up before; fails if none
  local lib=$1 real cand
  real=$(readlink -f "$lib")
  for cand in "$lib" "$real" "${lib#/usr}" "/usr${lib#/usr}" "${real#/usr}" "/usr${real#/usr}"; do
    [[ -n ${owner_of[$cand]:-} ]] && { echo "${owner_of[$cand]}"; return 0; }
  done
  return 1
}

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

expected=(bin/kcached bin/kcache-compile-worker bin/kcache bin/kcache-example-worker lib/libkcache.so)
binaries=()
for rel in "${expected[@]}"; do
  if [[ -f $prefix/$rel ]]; then binaries+=("$prefix/$rel"); else fail "cmake --install does not install $rel"; fi
done

declare -A ldd_of=()
all_libs=()
for bin in "${binaries[@]}"; do
  ldd_of[$bin]=$(ldd "$bin" 2>&1) || { fail "ldd ${bin#"$prefix"/}: ${ldd_of[$bin]}"; unset "ldd_of[$bin]"; continue; }
  all_libs+=($(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"${ldd_of[$bin]}"))
done
((${#all_libs[@]})) && lookup_owners $(printf '%s\n' "${all_libs[@]}" | sort -u)

declare -A package_of=()   # library path -> package, for the report
for bin in "${!ldd_of[@]}"; do
  ldd_out=${ldd_of[$bin]}
  while read -r line; do
    [[ $line == *"=>"* ]] || continue
    name=${line%% =>*}; name=${name//[[:space:]]/}
    path=$(awk '{print $3}' <<<"$line")
    if [[ $path == not ]]; then fail "${bin#"$prefix"/} links $name, which is not found"; continue; fi
    case $path in
      "$cuda_root"/*|/usr/local/cuda*) fail "${bin#"$prefix"/} links $path from the CUDA toolkit (NVRTC/nvJitLink must be dlopen'd)"; continue ;;
    esac
    if ! pkg=$(owner "$path"); then
      fail "${bin#"$prefix"/} links $path, which no Debian package owns (the image cannot install it)"
      continue
    fi
    package_of[$path]=$pkg
    if ! in_list "$pkg" && ! in_base "$pkg"; then
      fail "${bin#"$prefix"/} links $path from package $pkg, which scripts/install-runtime-deps.sh does not install"
    fi
  done <<<"$ldd_out"
done
echo "linked libraries by package:"
for path in "${!package_of[@]}"; do echo "  ${package_of[$path]}  $path"; done | sort | sed 's/^/ /'

# The dlopen'd CUDA libraries: found in the toolkit as engine/compile/toolkit.cc finds them.
find_lib() {
  local base=$1 dir
  for dir in "$cuda_root/lib64" "$cuda_root/lib" "$cuda_root"/targets/*/lib; do
    [[ -d $dir ]] || continue
    compgen -G "$dir/$base.[0-9]*" >/dev/null && { ls "$dir/$base".[0-9]* | sort -V | tail -n1; return 0; }
    [[ -e $dir/$base ]] && { echo "$dir/$base"; return 0; }
  done
  return 1
}
soname() { objdump -p "$1" 2>/dev/null | awk '$1 == "SONAME" {print $2}'; }

nvrtc=$(find_lib libnvrtc.so) || { fail "no libnvrtc.so* under $cuda_root (lib64, lib, targets/*/lib)"; nvrtc=; }
nvjitlink=$(find_lib libnvJitLink.so) || { fail "no libnvJitLink.so* under $cuda_root"; nvjitlink=; }
lookup_owners $nvrtc $nvjitlink
if [[ -n $nvrtc ]]; then
  # The toolkit's major.minor, from the builtins library next to libnvrtc (libnvrtc-builtins.so.13.0).
  builtins=$(ls "$(dirname "$nvrtc")"/libnvrtc-builtins.so.[0-9]*.[0-9]* 2>/dev/null | grep -v alt | head -n1 || true)
  version=${builtins##*libnvrtc-builtins.so.}
  [[ $version =~ ^[0-9]+\.[0-9]+$ ]] || { fail "cannot tell the CUDA version from $builtins"; version=0.0; }
  series=${version/./-}
  declare -A want=(
    [libnvrtc]="cuda-nvrtc-$series"
    [libnvJitLink]="libnvjitlink-$series"
  )
  for lib in "$nvrtc" "$nvjitlink"; do
    [[ -n $lib ]] || continue
    so=$(soname "$lib"); base=${so%%.so*}
    pkg=${want[$base]:-}
    [[ -n $so && -n $pkg ]] || { fail "unexpected soname '$so' for $lib"; continue; }
    if [[ ${so##*.so.} != "${version%%.*}" ]]; then
      fail "$lib has soname $so; the toolkit is CUDA $version"
    fi
    if owner_pkg=$(owner "$lib"); then
      # A dpkg-managed toolkit (as in the image's build stage): the owner must be listed.
      echo "dlopen'd $so: $lib from package $owner_pkg"
      in_list "$owner_pkg" || fail "$so comes from $owner_pkg, which scripts/install-runtime-deps.sh does not install"
    else
      # Not dpkg-managed (a runfile or pip-wheel toolkit): the list must hold the package of
      # NVIDIA's repository that ships this soname for this CUDA version.
      echo "dlopen'd $so: $lib (not dpkg-managed; requires $pkg in the list)"
    fi
    in_list "$pkg" || fail "kcache dlopens $so (CUDA $version at $cuda_root); scripts/install-runtime-deps.sh does not install $pkg"
  done
fi

if ((failures)); then
  echo "$failures problem(s); the list is in scripts/install-runtime-deps.sh" >&2
  exit 1
fi
echo "OK: every library of the installed binaries comes from a package of scripts/install-runtime-deps.sh"
