#!/usr/bin/env bash
# Self-test of check_includes.sh: it passes on a tree that keeps the layers, and fails, naming
# the file, on each kind of include that breaks them.
set -euo pipefail
check=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/check_includes.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make_tree() {  # a minimal tree that keeps the layers
  rm -rf "$tmp/tree" && mkdir -p "$tmp/tree"/{core,engine/store,daemon/cache,client/cli,bench,tests}
  echo '#include "absl/status/status.h"' >"$tmp/tree/core/target.h"
  echo '#include "core/target.h"' >"$tmp/tree/engine/store/store.h"
  printf '#include "engine/store/store.h"\n#include "kcache/v1/kcache.pb.h"\n' >"$tmp/tree/daemon/cache/cache.h"
  echo '#include "engine/store/store.h"' >"$tmp/tree/client/cli/commands.cc"
  echo '#include "daemon/cache/cache.h"' >"$tmp/tree/tests/cache_test.cc"
}

make_tree
"$check" "$tmp/tree" >/dev/null || { echo "FAIL: a tree that keeps the layers was refused"; exit 1; }

cases=(
  "core/id.cc|#include \"engine/store/store.h\"|core/ is the vocabulary"
  "engine/store/x.cc|#include \"daemon/cache/cache.h\"|engine/ is shared"
  "engine/store/y.cc|  #  include <client/lib/wire.h>|engine/ is shared"
  "client/cli/get.cc|#include \"daemon/cache/cache.h\"|only daemon/ includes daemon/ headers"
  "bench/b.cc|#include \"daemon/cache/cache.h\"|only daemon/ includes daemon/ headers"
  "daemon/cache/z.cc|#include \"kcache/kcache.h\"|kcached does not link libkcache"
)
for c in "${cases[@]}"; do
  IFS='|' read -r file line want <<<"$c"
  make_tree
  echo "$line" >"$tmp/tree/$file"
  if out=$("$check" "$tmp/tree"); then
    echo "FAIL: $file with '$line' passed the check"; exit 1
  fi
  grep -q "^layering: $file:1:.*$want" <<<"$out" || { echo "FAIL: $file: no line naming it with '$want':"; echo "$out"; exit 1; }
done
# Two folders that include each other, through a third.
make_tree
mkdir -p "$tmp/tree/engine/a" "$tmp/tree/engine/b"
echo '#include "engine/b/y.h"' >"$tmp/tree/engine/a/x.h"
echo '#include "engine/store/store.h"' >"$tmp/tree/engine/b/y.h"
echo '#include "engine/a/x.h"' >"$tmp/tree/engine/store/z.cc"
if out=$("$check" "$tmp/tree"); then echo "FAIL: a folder cycle passed the check"; exit 1; fi
for folder in engine/a engine/b engine/store; do
  grep -q "^layering: folder cycle: .*$folder" <<<"$out" || { echo "FAIL: the cycle's line does not name $folder:"; echo "$out"; exit 1; }
done
# Two headers of one name.
make_tree
echo '#include "core/target.h"' >"$tmp/tree/client/cli/target.h"
if out=$("$check" "$tmp/tree"); then echo "FAIL: two headers named target.h passed the check"; exit 1; fi
grep -q "^layering: two headers named target.h: .*core/target.h" <<<"$out" || { echo "FAIL: no line naming both target.h:"; echo "$out"; exit 1; }
echo "check_includes.sh: $((${#cases[@]} + 2)) broken trees refused, the good one passed"
