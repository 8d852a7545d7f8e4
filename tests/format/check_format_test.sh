#!/usr/bin/env bash
# Self-test of check_format.sh: a formatted tree passes; a misformatted file fails, named; a
# file under tests/testdata is not checked; --fix formats it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=$here/check_format.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/core" "$tmp/tests/testdata"
cp "$here/../../.clang-format" "$tmp/"
printf 'int Add(int a, int b) { return a + b; }\n' >"$tmp/core/add.cc"
printf 'int   odd ( ) {return 1;}\n' >"$tmp/tests/testdata/input.h"
set +e
out=$("$check" "$tmp" 2>&1); rc=$?
set -e
((rc == 125)) && { echo "$out"; exit 125; }  # another clang-format: skipped, say so
((rc == 0)) || { echo "FAIL: a formatted tree was refused: $out"; exit 1; }
printf 'int Sub(int a,int b){return a-b;}\n' >"$tmp/core/sub.cc"
if out=$("$check" "$tmp" 2>&1); then echo "FAIL: a misformatted file passed"; exit 1; fi
grep -q "^format: core/sub.cc is not formatted" <<<"$out" || { echo "FAIL: sub.cc not named: $out"; exit 1; }
grep -q "add.cc\|testdata" <<<"$out" && { echo "FAIL: a formatted or skipped file was named: $out"; exit 1; }
"$check" --fix "$tmp" >/dev/null
"$check" "$tmp" >/dev/null || { echo "FAIL: --fix did not fix"; exit 1; }
echo "check_format.sh: a misformatted file refused and named, testdata skipped, --fix fixes"
