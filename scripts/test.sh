#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest.
# Tests that need a GPU skip (exit 125) on machines without one.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build=${KCACHE_BUILD_DIR:-$root/build}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@"
