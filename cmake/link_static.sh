#!/bin/bash
# The link launcher of kcache-launch (RULE_LAUNCH_LINK; client/launch/CMakeLists.txt). It runs
# the link command it is given with every shared library named by path (/…/libX.so or
# libX.so.N) replaced by the static archive beside it (/…/libX.a) where there is one, grouped
# so their order does not matter, and libstdc++ and libgcc linked statically: kcache-launch
# starts for every compile a build runs, and the dynamic loader mapping and relocating its ~40
# libraries was ~5 ms of each served compile. Libraries without an archive stay shared. When
# that link fails, the command as given runs instead (a dynamic kcache-launch works the same).
set -u
archives=()
args=()
for arg in "$@"; do
  if [[ "$arg" =~ ^(/.+/lib[^/]+)\.so(\.[0-9.]+)?$ && -f "${BASH_REMATCH[1]}.a" ]]; then
    archives+=("${BASH_REMATCH[1]}.a")
  else
    args+=("$arg")
  fi
done
if ((${#archives[@]} > 0)) &&
  "${args[@]}" -static-libstdc++ -static-libgcc -Wl,--start-group "${archives[@]}" \
    -Wl,--end-group; then
  exit 0
fi
echo "link_static.sh: the static link failed; linking with the shared libraries" >&2
exec "$@"
