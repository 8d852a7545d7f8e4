#!/usr/bin/env bash
# The main job: installs what is missing and builds; warms the bundled kernels for three
# architectures into a local store (as an image build would, no GPU needed); starts kcached on
# that store as the worker's sidecar would; starts an example worker against it; then starts
# the same worker compiling its kernels itself, as workers do today, and prints what kcache
# saved.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build=${KCACHE_BUILD_DIR:-$root/build}
kcache=$build/client/cli/kcache
kcached=$build/daemon/kcached
worker=$build/examples/worker/kcache-example-worker
manifest=$root/kernels/manifest.yaml
arch=${KCACHE_DEMO_ARCH:-7.5,8.6,8.9}
device=${KCACHE_DEMO_DEVICE:-8.9}
work=$(mktemp -d /tmp/kcache-demo.XXXXXX)
socket=$work/kcache.sock

daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" || true
  fi
}
trap cleanup EXIT

echo "== 1. kcache warm --arch $arch (the image build: every kernel compiled once per target)"
"$kcache" warm --arch "$arch" --store "$work/baked" "$manifest"
echo
echo "== 2. kcached on that store (the sidecar): socket $socket"
"$kcached" --store "$work/store" --baked "$work/baked" --listen "unix://$socket" \
  --probe-port 0 >"$work/kcached.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 100); do
  [[ -S $socket ]] && "$kcache" stat --server "unix://$socket" >/dev/null 2>&1 && break
  sleep 0.1
done
echo "kcached is up (pid $daemon_pid, log $work/kcached.log)"
echo
echo "== 3. a worker starts on an SM $device device and fetches its kernels from kcached"
"$worker" --manifest "$manifest" --server "unix://$socket" --device "$device" --driver 13000 \
  --json >"$work/cached.json"
"$worker" --manifest "$manifest" --server "unix://$socket" --device "$device" --driver 13000
echo
echo "== 4. the same worker without kcache: compiles every kernel itself with NVRTC"
"$worker" --manifest "$manifest" --no-cache --device "$device" --json >"$work/compiled.json"
echo
python3 - "$work/cached.json" "$work/compiled.json" <<'PY'
import json, sys
cached = json.load(open(sys.argv[1]))["total_micros"]
compiled = json.load(open(sys.argv[2]))["total_micros"]
print(f"== what kcache saved: worker start-up {compiled/1e3:.0f} ms compiling -> "
      f"{cached/1e3:.1f} ms through kcached ({compiled/cached:.0f}x faster)")
PY
# (to a file first: with pipefail, `kcache stat | head` fails when head exits before stat)
"$kcache" stat --server "unix://$socket" >"$work/stat.txt"
head -n 20 "$work/stat.txt"
