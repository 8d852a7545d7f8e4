#!/usr/bin/env bash
# The include graph is the architecture (docs/architecture.md): a layer includes only the layers
# below it. Fails, naming each file and line, when
#   core/                          includes engine/, daemon/ or client/ (or kcache/*.h, the public API)
#   engine/                        includes daemon/ or client/ (or kcache/*.h)
#   client/ bench/ examples/ kernels/   include daemon/
#   daemon/                        includes client/ (the daemon serves libkcache; it does not use it)
# tests/ may include every layer (they test each one). It also fails when
#   a folder includes, through other folders, itself (engine/a includes engine/b, which
#   includes engine/a): each folder's job sits above or below each other's, never both
#   two headers of core/, engine/, daemon/ or client/ have one name (what an include means
#   must not depend on which folder a reader thinks it is in)
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

# The folder graph: "A B" for each folder A with a file that includes a header of folder B.
layers=$(for d in core engine daemon client kernels; do if [[ -d $d ]]; then echo "$d"; fi; done)
edges=$( (grep -rnoE --include='*.h' --include='*.cc' --include='*.c' \
  '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(core|engine|daemon|client|kernels)/[^"]+"' \
  $layers || true) |
  sed -E 's|^([^:]+):[0-9]+:.*"([^"]+)"$|\1 \2|' |
  while read -r file header; do
    from=$(dirname "$file") to=$(dirname "$header")
    [[ $from == "$to" ]] || echo "$from $to"
  done | sort -u)
if [[ -n $edges ]] && ! loop=$(tsort <<<"$edges" 2>&1 >/dev/null); then
  members=$(sed -n 's/^tsort: \([^ ]*\)$/\1/p' <<<"$loop" | grep -v '^-:' | tr '\n' ' ')
  echo "layering: folder cycle: ${members}<- these folders include each other, through the others named; move what both need below both"
  failed=1
fi
names=$(find $layers -name '*.h' | sed 's|.*/||' | sort | uniq -d)
for name in $names; do
  echo "layering: two headers named $name: $(find $layers -name "$name" | tr '\n' ' ')<- give each a name that says its job"
  failed=1
done

if ((failed)); then
  echo "layering: FAILED (docs/architecture.md: core <- engine <- daemon, client)"
  exit 1
fi
echo "layering: ok: core <- engine <- daemon, client; no file outside daemon/ includes daemon/; no folder cycle; no two headers of one name"
