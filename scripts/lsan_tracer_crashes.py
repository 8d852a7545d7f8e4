#!/usr/bin/env python3
"""Which failed tests of the last ctest run in BUILD failed only because LeakSanitizer crashed.

LeakSanitizer's own stop-the-world tracer sometimes dies at a process's exit ("Tracer caught
signal 11", then "LeakSanitizer has encountered a fatal error"), after the program's work is done
and before any leak is looked for: a fault of the sanitizer runtime's tracer itself, not of the
program. It has been seen in processes that
ran NVRTC in-process. When the test's own process crashes so, the test had passed; when a
program the test runs (the kcache CLI) crashes so, that program exits 1 and the test fails its
exit-code check, with the signature in the test's output. scripts/sanitize.sh runs such a test
again, up to 3 times, until a run passes; a run that fails otherwise fails the suite.

Prints the ctest numbers of those tests, comma-separated (for `ctest -I 0,0,0,N,...`), and exits
0 when every failure of the run is one; exits 1 (printing nothing) when any failure is anything
else (no signature, half of it, a sanitizer report): those are not retried.

    scripts/lsan_tracer_crashes.py BUILD
"""
import re
import sys
from pathlib import Path

SIGNATURE = ("Tracer caught signal 11", "LeakSanitizer has encountered a fatal error")
# Any of these in the output: a sanitizer found something real.
REAL = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "ERROR: ThreadSanitizer",
        "WARNING: ThreadSanitizer", "runtime error:", "SUMMARY: ")


def outputs(log: str) -> dict[str, str]:
    """Each test's output in ctest's LastTest.log, by name."""
    found = {}
    for match in re.finditer(r'^"([^"\n]+)" start time:.*?\nOutput:\n-+\n(.*?)<end of output>', log,
                             re.M | re.S):
        found[match.group(1)] = match.group(2)
    return found


def main() -> int:
    temporary = Path(sys.argv[1]) / "Testing" / "Temporary"
    try:
        failed = (temporary / "LastTestsFailed.log").read_text().splitlines()
    except FileNotFoundError:
        return 1
    by_name = outputs((temporary / "LastTest.log").read_text(errors="replace"))
    numbers = []
    for entry in failed:
        number, _, name = entry.partition(":")
        output = by_name.get(name, "")
        if not all(s in output for s in SIGNATURE) or any(s in output for s in REAL):
            return 1
        numbers.append(number)
    print(",".join(numbers))
    return 0 if numbers else 1


if __name__ == "__main__":
    sys.exit(main())
