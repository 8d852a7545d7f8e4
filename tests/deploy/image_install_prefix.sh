#!/usr/bin/env bash
# What the image does, from an install prefix instead of an image (no Docker engine needed):
#   1. `cmake --install` into a temporary prefix (the image copies /staging/usr/local);
#   2. the warm stage: <prefix>/bin/kcache warm --arch 8.9 --store T on a small manifest of
#      bundled kernels, then `kcache ls` shows them; a broken kernel makes warm exit 1 with the
#      NVRTC log on stderr (what fails an image build);
#   3. the runtime stage: <prefix>/bin/kcached (as uid 10001 when run as root) on T as a
#      read-only, root-owned baked store, with a toolkit made of only the files of the CUDA
#      packages of scripts/install-runtime-deps.sh when the local toolkit says which file is
#      whose (dpkg, or the dist-info of NVIDIA's wheels); its compile worker must be
#      <prefix>/bin/kcache-compile-worker; <prefix>/bin/kcache-example-worker gets the kernels
#      for 8.9 from the baked store and for 8.6 from a compile by kcached (a miss: what needs
#      NVRTC, nvJitLink and the headers at run time).
#
#   image_install_prefix.sh BUILD_DIR SOURCE_DIR [CUDA_ROOT]
set -euo pipefail
build=${1:?usage: image_install_prefix.sh BUILD_DIR SOURCE_DIR [CUDA_ROOT]}
source_dir=${2:?usage: image_install_prefix.sh BUILD_DIR SOURCE_DIR [CUDA_ROOT]}
cuda_root=$(readlink -f "${3:-${CUDA_HOME:-/usr/local/cuda}}")
list_script=${KCACHE_RUNTIME_DEPS_SCRIPT:-$source_dir/scripts/install-runtime-deps.sh}

work=$(mktemp -d /tmp/kcache-image-prefix.XXXXXX)
daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
  fi
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "FAIL: $*" >&2; [[ -f $work/kcached.log ]] && sed 's/^/  kcached: /' "$work/kcached.log" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; die "cmake --install $build"; }
installed=(bin/kcached bin/kcache-compile-worker bin/kcache bin/kcache-example-worker
           lib/libkcache.so lib/kcache/libkcache-observe.so include/kcache/kcache.h
           include/kcache/kcache_c.h)
# The NVRTC and driver stand-ins `kcache run` preloads are built for x86-64 only (client/nvrtc,
# client/cuda).
[[ $(uname -m) != x86_64 ]] ||
  installed+=(lib/kcache/nvrtc/libnvrtc.so.13 lib/kcache/nvrtc/libnvrtc.so.12
              lib/kcache/nvrtc/libkcache-nvrtc.so
              lib/kcache/cuda/libcuda.so.1 lib/kcache/cuda/libkcache-cuda.so)
for f in "${installed[@]}"; do
  [[ -e $prefix/$f ]] || die "cmake --install does not install $f"
done

# The installed launcher finds its observer (lib/kcache/): a compile is recorded, then served.
echo 'int f(void) { return 1; }' >"$work/launch.c"
for b in b1 b2; do
  mkdir -p "$work/$b"
  (cd "$work/$b" && KCACHE_STORE=$work/objects KCACHE_STATE_DIR=$work/state KCACHE_LOG=1 \
    "$prefix/bin/kcache" cc -c "$work/launch.c" -o f.o) 2>>"$work/launch.log" ||
    { cat "$work/launch.log" >&2; die "the installed kcache cc"; }
done
grep -q "kcache: hit" "$work/launch.log" ||
  { cat "$work/launch.log" >&2; die "the installed kcache did not serve the compile it recorded"; }

# -- 2. warm stage ---------------------------------------------------------------------------
# Two bundled kernels: one with cuda_fp16/bf16 headers, one with CUB (CCCL).
kernels=$work/kernels
mkdir -p "$kernels"
cp "$source_dir"/kernels/{common.cuh,timestep_embedding.cu,moe_routing.cu} "$kernels/"
python3 - "$source_dir/kernels/manifest.yaml" "$kernels/manifest.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
# Keep the header and the entries of the two kernels, verbatim.
head, _, body = text.partition("kernels:\n")
entries = ["  - name:" + e for e in body.split("  - name:")[1:]]
keep = [e for e in entries if e.split("\n", 1)[0].split(":", 1)[1].strip() in ("timestep_embedding", "moe_routing")]
assert len(keep) == 2, keep
open(sys.argv[2], "w").write(head + "kernels:\n" + "".join(e if e.endswith("\n") else e + "\n" for e in keep))
PY

store=$work/opt-kcache/store
"$prefix/bin/kcache" warm --arch 8.9 --jobs 2 --toolkit "$cuda_root" --store "$store" \
  "$kernels/manifest.yaml" >"$work/warm.log" 2>&1 || { cat "$work/warm.log" >&2; die "kcache warm"; }
"$prefix/bin/kcache" ls --store "$store" >"$work/ls.log" 2>&1 || { cat "$work/ls.log" >&2; die "kcache ls"; }
for k in timestep_embedding moe_routing; do
  grep -q "$k" "$work/ls.log" || { cat "$work/ls.log" >&2; die "kcache ls does not list $k"; }
done
echo "warm + ls from $prefix/bin: ok"

# A compile error: exit 1, the kernel and the NVRTC log on stderr.
mkdir -p "$work/broken"
printf 'extern "C" __global__ void broken(float* x) { x[0] = undeclared_identifier; }\n' >"$work/broken/broken.cu"
printf 'version: 1\nkernels:\n  - name: broken\n    source: broken.cu\n' >"$work/broken/manifest.yaml"
set +e
"$prefix/bin/kcache" warm --arch 8.9 --toolkit "$cuda_root" --store "$work/broken-store" \
  "$work/broken/manifest.yaml" >"$work/broken.out" 2>"$work/broken.err"
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$work/broken.out" "$work/broken.err" >&2; die "warm of a broken kernel exited $rc, not 1"; }
grep -q "undeclared_identifier" "$work/broken.err" && grep -q "broken" "$work/broken.err" ||
  { echo "stdout:" >&2; cat "$work/broken.out" >&2; echo "stderr:" >&2; cat "$work/broken.err" >&2;
    die "warm of a broken kernel does not print the kernel and the NVRTC log on stderr"; }
echo "broken kernel: exit 1, NVRTC log on stderr: ok"

# -- 3. runtime stage ------------------------------------------------------------------------
# The toolkit kcached gets: only the files of the CUDA runtime packages of the list.
mapfile -t cuda_packages < <(env -u CUDA_VERSION "$list_script" --print --cuda-only)
runtime_toolkit=$work/cuda-runtime
# NVIDIA's wheels name their components differently from the .deb packages of the same files.
wheel_of() {
  case $1 in
    cuda-nvrtc-*) echo nvidia_cuda_nvrtc ;;
    libnvjitlink-*) echo nvidia_nvjitlink ;;
    cuda-cudart-dev-*|cuda-cudart-*) echo nvidia_cuda_runtime ;;
    cuda-cccl-*) echo nvidia_cuda_cccl ;;
    cuda-crt-*) echo nvidia_cuda_crt ;;
    *) echo "" ;;
  esac
}
files_of() {   # the toolkit files (relative to the root) a package ships; fails if unknown
  local pkg=$1 wheel record
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    dpkg-query -L "$pkg" | while read -r f; do
      [[ -f $f && $f == "$cuda_root"/* ]] && echo "${f#"$cuda_root"/}"
    done
    # deb layout: <root>/targets/x86_64-linux/{include,lib}; include and lib64 link there.
    return 0
  fi
  wheel=$(wheel_of "$pkg")
  record=$(ls -d "$cuda_root"/dist-info/"$wheel"-*.dist-info/RECORD 2>/dev/null | head -n1 || true)
  [[ -n $wheel && -f $record ]] || return 1
  cut -d, -f1 "$record" | sed -n 's#^nvidia/cu[0-9]*/include/#include/#p; s#^nvidia/cu[0-9]*/lib/#lib64/#p'
}
subset=1
for pkg in "${cuda_packages[@]}"; do
  files_of "$pkg" >"$work/files.$pkg" 2>/dev/null && [[ -s $work/files.$pkg ]] || { subset=0; break; }
done
if ((subset)); then
  for pkg in "${cuda_packages[@]}"; do
    while read -r rel; do
      src=$cuda_root/$rel
      [[ -e $src ]] || continue
      mkdir -p "$runtime_toolkit/$(dirname "$rel")"
      case $rel in
        *.so*) ln -sf "$src" "$runtime_toolkit/$rel" ;;   # libraries: dlopen'd by path
        *) cp "$src" "$runtime_toolkit/$rel" ;;            # headers: copies, so includes stay inside
      esac
    done <"$work/files.$pkg"
  done
  # The deb layout's links (install-runtime-deps.sh makes them when the packages do not).
  for t in "$runtime_toolkit"/targets/*-linux; do
    [[ -d $t/include && ! -e $runtime_toolkit/include ]] && ln -s "${t#"$runtime_toolkit"/}/include" "$runtime_toolkit/include"
    [[ -d $t/lib && ! -e $runtime_toolkit/lib64 ]] && ln -s "${t#"$runtime_toolkit"/}/lib" "$runtime_toolkit/lib64"
  done
  echo "kcached's toolkit: only the files of ${cuda_packages[*]}"
else
  runtime_toolkit=$cuda_root
  echo "NOTE: cannot tell which files of $cuda_root belong to ${cuda_packages[*]} (neither dpkg nor dist-info); kcached uses the whole toolkit"
fi

# As in the image: the baked store owned by root and not writable; kcached as uid/gid 10001
# when this runs as root (setpriv), with its writable store and socket folder its own.
chmod -R a-w "$work/opt-kcache"
socket=$work/run/kcache.sock
mkdir -p "$work/run" "$work/var-lib-kcache"
as_user=()
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null; then
  chmod 755 "$work"
  chown 10001:10001 "$work/run" "$work/var-lib-kcache"
  as_user=(setpriv --reuid=10001 --regid=10001 --clear-groups)
fi
(cd / && exec "${as_user[@]}" "$prefix/bin/kcached" --store "$work/var-lib-kcache" --baked "$store" \
   --listen "unix://$socket" --probe-port 0 --toolkit "$runtime_toolkit" --compile-workers 2) \
   >"$work/kcached.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 200); do
  [[ -S $socket ]] && "$prefix/bin/kcache" stat --server "unix://$socket" >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || die "kcached exited"
  sleep 0.1
done
[[ -S $socket ]] || die "kcached did not listen on $socket"

# Its compile worker is the installed one, next to it.
workers=$(pgrep -P "$daemon_pid" || true)
[[ -n $workers ]] || die "kcached started no compile worker"
for pid in $workers; do
  exe=$(readlink -f "/proc/$pid/exe")
  [[ $exe == "$prefix/bin/kcache-compile-worker" ]] ||
    die "kcached's compile worker is $exe, not $prefix/bin/kcache-compile-worker"
done
if ((${#as_user[@]})); then
  [[ $(stat -c %u "/proc/$daemon_pid") == 10001 ]] || die "kcached does not run as uid 10001"
fi
echo "kcached from $prefix/bin (uid $(stat -c %u "/proc/$daemon_pid")), compile worker $prefix/bin/kcache-compile-worker: ok"

check_worker() {   # device, where every kernel must be served from (served_from, a regex)
  local device=$1 want=$2
  # No toolkit for the worker itself, and a long deadline: every kernel must come from kcached
  # (its baked store, or a compile by kcached), never from the client's local fallback.
  "$prefix/bin/kcache-example-worker" --manifest "$kernels/manifest.yaml" --server "unix://$socket" \
    --device "$device" --driver 13000 --deadline-ms 240000 --toolkit "$work/no-toolkit" --json \
    >"$work/worker-$device.json" 2>"$work/worker-$device.err" ||
    { cat "$work/worker-$device.json" "$work/worker-$device.err" >&2; die "example worker on $device"; }
  python3 - "$work/worker-$device.json" "$want" <<'PY' || die "example worker on $device: $(cat "$work/worker-$device.json")"
import json, re, sys
report = json.load(open(sys.argv[1]))
kernels = report["kernels"]
assert len(kernels) == 2 and report["failed"] == 0, report
for k in kernels:
    assert k["outcome"] == "served" and re.fullmatch(sys.argv[2], k["served_from"]), k
print(f"  {report['device']}: " + ", ".join(f"{k['name']} {k['rule']} from {k['served_from']}" for k in kernels))
PY
}
check_worker 8.9 'daemon:(baked_store|memory)'  # memory: the start-up warm's answer
check_worker 8.6 'daemon:compile'
echo "OK: installed kcache, kcached, compile worker and example worker work together on a baked store"
