#!/usr/bin/env bash
# The README's "Layout" section names every folder a reader meets: each top-level folder of the
# tree, and each folder of engine/, daemon/, client/ and tests/. Fails naming those it leaves out.
#
#   tests/layering/check_readme_layout.sh [ROOT]     (default: the repository this script is in)
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$root"
layout=$(awk '/^## Layout/{on=1; next} on && /^## /{exit} on' README.md)
missing=()
for dir in core proto engine daemon client examples kernels deploy cmake scripts requirements \
  tests bench docs; do
  [[ -d $dir ]] || continue
  grep -qE "(^|[[:space:]])$dir/" <<<"$layout" || missing+=("$dir/")
done
for parent in engine daemon client tests; do
  [[ -d $parent ]] || continue
  for sub in "$parent"/*/; do
    name=$(basename "$sub")
    grep -qE "(^|[[:space:](])$name/" <<<"$layout" || missing+=("$parent/$name/")
  done
done
if ((${#missing[@]})); then
  echo "readme-layout: README.md's Layout leaves out: ${missing[*]}"
  exit 1
fi
echo "readme-layout: ok: README.md's Layout names every folder"
