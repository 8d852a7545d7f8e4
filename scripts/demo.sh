#!/usr/bin/env bash
# The main job: installs what is missing, builds, warms the bundled kernels for three
# architectures into a local store, warms again (everything cached), lists the store and
# fetches what an SM 8.9 device would be served.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build=${KCACHE_BUILD_DIR:-$root/build}
kcache=$build/client/cli/kcache
store=${KCACHE_DEMO_STORE:-$(mktemp -d /tmp/kcache-demo.XXXXXX)/store}
arch=${KCACHE_DEMO_ARCH:-7.5,8.6,8.9}

echo "== kcache warm --arch $arch (cold store: every kernel compiled once per target)"
"$kcache" warm --arch "$arch" --store "$store" "$root/kernels/manifest.yaml"
echo
echo "== kcache warm again (everything is already cached: nothing compiles)"
"$kcache" warm --arch "$arch" --store "$store" "$root/kernels/manifest.yaml" | tail -n 7
echo
echo "== kcache ls"
"$kcache" ls --store "$store"
echo
echo "== kcache stat"
"$kcache" stat --store "$store"
echo
echo "== kcache get: what an SM 8.9 device, then an SM 9.0 device (not warmed) is served"
"$kcache" get --store "$store" --device 8.9 --kernel softmax -o "$(dirname "$store")/softmax.cubin" --no-compile
"$kcache" get --store "$store" --device 9.0 --kernel softmax --no-compile
echo
echo "store left at $store"
