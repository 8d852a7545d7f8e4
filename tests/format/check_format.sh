#!/usr/bin/env bash
# .clang-format, enforced: fails naming every C/C++ file of the project that clang-format would
# change, with the command that fixes them. The formatter is Debian 12's clang-format 14
# (scripts/install-deps.sh installs it); another major version formats some constructs
# differently, so with one the check is skipped (exit 125), never passed.
#
#   tests/format/check_format.sh [ROOT]      check (default: this repository)
#   tests/format/check_format.sh --fix [ROOT] format those files in place
# Not checked: tests/testdata and tests/deploy/testdata (inputs whose bytes tests depend on).
set -euo pipefail
fix=0
if [[ ${1:-} == --fix ]]; then fix=1; shift; fi
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
want_major=14
formatter=${CLANG_FORMAT:-clang-format}

if ! command -v "$formatter" >/dev/null; then
  echo "format: $formatter not found: run scripts/install-deps.sh (Debian package clang-format)" >&2
  exit 1
fi
major=$("$formatter" --version | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
if [[ $major != "$want_major" ]]; then
  echo "format: SKIP: $formatter is version ${major:-unknown}; the project formats with clang-format $want_major (Debian 12), set CLANG_FORMAT to it" >&2
  exit 125
fi

cd "$root"
mapfile -d '' files < <(find core engine daemon client bench examples kernels tests \
  \( -path tests/testdata -o -path tests/deploy/testdata \) -prune -o \
  -type f \( -name '*.cc' -o -name '*.h' -o -name '*.c' -o -name '*.cpp' \) -print0 2>/dev/null | sort -z)
if ((fix)); then
  "$formatter" -i --style=file "${files[@]}"
  echo "format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$formatter" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  for f in "${bad[@]}"; do echo "format: $f is not formatted as .clang-format says"; done
  echo "format: FAILED: ${#bad[@]} of ${#files[@]} files; fix with tests/format/check_format.sh --fix (or clang-format -i FILE)"
  exit 1
fi
echo "format: ok: ${#files[@]} files formatted as .clang-format says (clang-format $major)"
