#!/usr/bin/env bash
# End to end, without Docker: what deploy/Dockerfile and the pod in deploy/k8s/base do, on
# this machine.
#   1. the Dockerfile's warm stage: `kcache warm --arch <its KCACHE_ARCH>` of the bundled
#      kernels into <root>/opt/kcache/store, the manifest beside it;
#   2. the sidecar: kcached with the kcached container's own args (deploy/tools/pod_args.py),
#      paths moved under a temp root and the probe port made free (0);
#   3. the worker container's command and args, against the socket, twice; then a compile
#      with the container's environment (its CXX: the image's kcache shim) in two build
#      directories: the second is served by kcached;
#   4. a scrape of the probe port's /metrics: the counters moved, nothing was compiled (the
#      warmed store served every kernel), the second start hit memory;
#   5. SIGTERM: kcached exits 0 and removes its socket.
# Binaries from $KCACHE_CLI, $KCACHED, $KCACHE_EXAMPLE_WORKER (ctest sets them), else build/.
# The machine has no GPU, so the worker resolves for --device $KCACHE_E2E_DEVICE (8.9).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KCACHE_BUILD_DIR:-$repo/build}
kcache=${KCACHE_CLI:-$build/client/cli/kcache}
kcached=${KCACHED:-$build/daemon/kcached}
worker=${KCACHE_EXAMPLE_WORKER:-$build/examples/worker/kcache-example-worker}
device=${KCACHE_E2E_DEVICE:-8.9}
python=$repo/scripts/venv-python
# The pod's flags come from rendering deploy/k8s/base with kustomize (deploy/tools/pod_args.py).
if [[ -z ${KUSTOMIZE:-} ]] && ! command -v kubectl >/dev/null && ! command -v kustomize >/dev/null; then
  echo "e2e: SKIP: neither kubectl nor kustomize is installed (or \$KUSTOMIZE set) to render deploy/k8s/base" >&2
  exit 125
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/kcache-e2e.XXXXXX")
daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then kill -KILL "$daemon_pid"; fi
  rm -rf "$root"
}
trap cleanup EXIT
fail() {
  echo "e2e: FAIL: $*" >&2
  if [[ -f $root/kcached.log ]]; then echo "--- kcached log" >&2; cat "$root/kcached.log" >&2; fi
  exit 1
}
step() { echo "e2e: $*"; }

# An image path moved under the temp root (/opt/kcache/store -> $root/opt/kcache/store).
relocate() {
  local arg=$1
  for dir in /var/lib/kcache /opt/kcache /run/kcache; do
    arg=${arg//=$dir/=$root$dir}
    arg=${arg//unix:\/\/$dir/unix://$root$dir}
  done
  echo "$arg"
}

# GET http://127.0.0.1:$port$path with bash alone; prints the body, fails unless 200.
http_get() {
  local port=$1 path=$2 response
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
  response=$(cat <&3)
  exec 3<&-
  [[ $response == "HTTP/1.1 200"* ]] || { echo "$response" | head -1 >&2; return 1; }
  echo "${response#*$'\r\n\r\n'}"
}

# A free TCP port on 127.0.0.1 (asked of the kernel, then released).
free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The value of one sample ("name{labels}") in a scrape, or "absent".
sample() {
  awk -v series="$2" '$1 == series { print $2; found = 1 } END { if (!found) print "absent" }' \
    <<<"$1"
}

expect() {  # expect <metrics> <series> <op> <number>
  local value
  value=$(sample "$1" "$2")
  [[ $value != absent ]] || fail "/metrics has no $2"
  awk -v v="$value" -v n="$4" -v op="$3" \
    'BEGIN { exit !((op == ">" && v > n) || (op == "==" && v == n)) }' ||
    fail "$2 is $value, expected $3 $4"
  step "  $2 = $value"
}

# 1. The Dockerfile's warm stage.
arch=$(sed -n 's/^ARG KCACHE_ARCH=//p' "$repo/deploy/Dockerfile" | head -1)
[[ -n $arch ]] || fail "deploy/Dockerfile has no ARG KCACHE_ARCH=..."
mkdir -p "$root/opt" "$root/var/lib/kcache" "$root/run/kcache"
cp -r "$repo/kernels" "$root/opt/kcache"
step "warm stage: kcache warm --arch $arch (the Dockerfile's) of kernels/manifest.yaml"
"$kcache" warm --arch "$arch" --store "$root/opt/kcache/store" "$root/opt/kcache/manifest.yaml" \
  >"$root/warm.log" 2>&1 || { cat "$root/warm.log" >&2; fail "kcache warm failed"; }
tail -1 "$root/warm.log"

# 2. The sidecar, with the manifest's flags.
mapfile -t manifest_args < <("$python" "$repo/deploy/tools/pod_args.py" "$repo/deploy/k8s/base" kcached)
((${#manifest_args[@]})) || fail "no args for the kcached container in deploy/k8s/base"
daemon_args=()
socket=
for arg in "${manifest_args[@]}"; do
  case $arg in
    --probe-port=*) arg=--probe-port=$(free_port) ;;  # 7070 may be taken here
    *) arg=$(relocate "$arg") ;;
  esac
  [[ $arg == --listen=unix://* ]] && socket=${arg#--listen=unix://}
  daemon_args+=("$arg")
done
[[ -n $socket ]] || fail "the kcached container does not listen on a unix socket"
step "sidecar: kcached ${daemon_args[*]}"
"$kcached" "${daemon_args[@]}" >"$root/kcached.log" 2>&1 &
daemon_pid=$!
port=
for arg in "${daemon_args[@]}"; do [[ $arg == --probe-port=* ]] && port=${arg#--probe-port=}; done
[[ -n $port ]] || fail "the kcached container has no --probe-port"
ready=
for _ in $(seq 1 300); do
  [[ -S $socket ]] && http_get "$port" /healthz >/dev/null 2>&1 && ready=1 && break
  kill -0 "$daemon_pid" 2>/dev/null || fail "kcached exited during start-up"
  sleep 0.1
done
[[ -n $ready ]] || fail "kcached did not become ready in 30 s"
step "kcached ready: socket $socket, probe port $port"

# 3. The worker container, twice (a first start, then a restart of the worker).
mapfile -t worker_cmd < <("$python" "$repo/deploy/tools/pod_args.py" --command "$repo/deploy/k8s/base" worker)
worker_args=()
for arg in "${worker_cmd[@]:1}"; do worker_args+=("$(relocate "$arg")"); done
address=unix://$socket
for start in first second; do
  step "worker ($start start): ${worker_cmd[0]##*/} ${worker_args[*]} --device $device"
  KCACHE_ADDRESS=$address "$worker" "${worker_args[@]}" --device "$device" >"$root/worker.log" 2>&1 ||
    { cat "$root/worker.log" >&2; fail "the worker failed on its $start start"; }
  tail -1 "$root/worker.log"
done

# 3b. The worker container's own compiles (a torch extension's build) through kcached, with
# the container's environment: the image's masquerade links (made as deploy/Dockerfile's
# runtime stage makes them), a compile in one build directory, the same in another.
mapfile -t worker_env < <("$python" "$repo/deploy/tools/pod_args.py" --env "$repo/deploy/k8s/base" worker)
launcher_env=(KCACHE_LOG=1)
for assignment in "${worker_env[@]}"; do
  case $assignment in
    KCACHE_STATE_DIR=*) assignment=KCACHE_STATE_DIR=$root/tmp/kcache ;;  # the pod's /tmp
    *) assignment=$(relocate "$assignment") ;;
  esac
  launcher_env+=("$assignment")
done
cxx=
for assignment in "${launcher_env[@]}"; do [[ $assignment == CXX=* ]] && cxx=${assignment#CXX=}; done
[[ $cxx == "$root/opt/kcache/shims/"* ]] || fail "the worker container's CXX is not an image shim: $cxx"
"$kcache" env --server "$address" --shims "$root/opt/kcache/shims" >/dev/null ||
  fail "kcache env could not make the shims"
printf '#include <vector>\nint ext() { return std::vector<int>(4).size(); }\n' >"$root/ext.cpp"
for build_dir in build-a build-b; do
  mkdir -p "$root/$build_dir"
  (cd "$root/$build_dir" && env "${launcher_env[@]}" "$cxx" -MD -MF ext.o.d -c "$root/ext.cpp" \
    -o ext.o) >"$root/launcher.log" 2>&1 || { cat "$root/launcher.log" >&2; fail "\$CXX failed"; }
  outcome=$(grep -o 'kcache: [a-z]*' "$root/launcher.log" | head -1)
  step "worker's \$CXX in $build_dir: ${outcome:-no launcher log line}"
  expected="kcache: miss"
  [[ $build_dir == build-b ]] && expected="kcache: hit"
  [[ $outcome == "$expected" ]] || { cat "$root/launcher.log" >&2; fail "expected '$expected'"; }
done
cmp -s "$root/build-a/ext.o" "$root/build-b/ext.o" || fail "the served object differs from the compiled one"

# 4. The scrape.
metrics=$(http_get "$port" /metrics) || fail "GET /metrics failed"
step "scraped /metrics ($(wc -l <<<"$metrics") lines):"
expect "$metrics" kcache_resolve_requests_total ">" 0
expect "$metrics" kcache_startup_warmed_bytes_total ">" 0  # the baked store, read at start-up
expect "$metrics" 'kcache_resolve_hits_total{tier="memory"}' ">" 0
expect "$metrics" 'kcache_resolve_hits_total{tier="compile"}' "==" 0
expect "$metrics" kcache_compiles_total "==" 0
expect "$metrics" kcache_served_bytes_total ">" 0
expect "$metrics" kcache_compile_seconds_saved_total ">" 0
expect "$metrics" 'kcache_resolve_duration_seconds_count{outcome="memory"}' ">" 0
expect "$metrics" "kcache_store_artifacts{store=\"$root/opt/kcache/store\",role=\"baked\"}" ">" 0
expect "$metrics" "kcache_store_up{store=\"$root/var/lib/kcache\",role=\"writable\"}" "==" 1
expect "$metrics" kcache_serving "==" 1

# 5. The pod stops: SIGTERM.
kill -TERM "$daemon_pid"
code=0
wait "$daemon_pid" || code=$?
daemon_pid=
((code == 0)) || fail "kcached exited $code after SIGTERM"
[[ ! -e $socket ]] || fail "kcached left its socket behind"
step "kcached stopped cleanly; PASS"
