#!/usr/bin/env bash
# The include graph is the architecture (docs/architecture.md): a layer includes only the layers
# below it. Fails, naming each file and line, when
#   core/                          includes engine/, daemon/ or client/ (or kcache/*.h, the public API)
#   engine/                        includes daemon/ or client/ (or kcache/*.h)
#   client/ bench/ examples/ kernels/   include daemon/
#   daemon/                        includes client/ (the daemon serves libkcache; it does not use it)
# tests/ may include every layer (they test each one).
#
#   tests/layering/check_includes.sh [ROOT]     (default: the repository this script is in)
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$root"

failed=0
# libkcache's public headers (client/include/kcache/*.h); kcache/v1/ and kcache/internal/ are
# the generated protocol, which every side may include.
api='kcache/[^/"]+\.h'
# rule <folders> <forbidden include prefixes (extended regex)> <why>
rule() {
  local dirs=$1 forbidden=$2 why=$3 dir hits
  for dir in $dirs; do
    [[ -d $dir ]] || continue
    hits=$(grep -rnE --include='*.h' --include='*.cc' --include='*.c' --include='*.cpp' \
      "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]($forbidden)" "$dir" || true)
    if [[ -n $hits ]]; then
      while IFS= read -r hit; do
        echo "layering: $hit  <- $why"
      done <<<"$hits"
      failed=1
    fi
  done
}
rule "core" "engine/|daemon/|client/|$api" "core/ is the vocabulary: it includes no other layer"
rule "engine" "daemon/|client/|$api" "engine/ is shared by kcached, the kcache tool and libkcache: it includes core/ only"
rule "client bench examples kernels" "daemon/" "only daemon/ includes daemon/ headers: move what is shared into engine/"
rule "daemon" "client/|$api" "kcached does not link libkcache or the kcache tool"

if ((failed)); then
  echo "layering: FAILED (docs/architecture.md: core <- engine <- daemon, client)"
  exit 1
fi
echo "layering: ok: core <- engine <- daemon, client; no file outside daemon/ includes daemon/"
