#!/usr/bin/env python3
"""scripts/lsan_tracer_crashes.py: it picks out exactly the failures that are LeakSanitizer's
tracer crashing at a process's exit (the test's own, or a program's it ran), and no others. Run by ctest (scripts.lsan-tracer-crashes)."""
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lsan_tracer_crashes.py"
PASSED = "[ RUN      ] T.A\n[       OK ] T.A (1 ms)\n[  PASSED  ] 1 test.\n"
TRACER = "Tracer caught signal 11: addr=0x0 pc=0x1 sp=0x2\n==1==LeakSanitizer has encountered a fatal error.\n"


def entry(name: str, output: str) -> str:
    return (f"3/9 Testing: {name}\n3/9 Test: {name}\nCommand: \"x\"\nDirectory: /\n"
            f"\"{name}\" start time: Nov 25 15:18 UTC\nOutput:\n{'-' * 58}\n{output}"
            f"<end of output>\nTest time =   0.1 sec\n{'-' * 58}\nTest Failed.\n")


def verdict(failed: dict[str, tuple[int, str]]) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as build:
        temporary = Path(build) / "Testing" / "Temporary"
        temporary.mkdir(parents=True)
        (temporary / "LastTestsFailed.log").write_text(
            "".join(f"{number}:{name}\n" for name, (number, _) in failed.items()))
        (temporary / "LastTest.log").write_text(
            "Start testing\n" + "".join(entry(name, out) for name, (_, out) in failed.items()))
        result = subprocess.run([sys.executable, str(SCRIPT), build], stdout=subprocess.PIPE,
                                text=True)
        return result.returncode, result.stdout.strip()


def main() -> int:
    cases = [
        ("only tracer crashes", {"A.B": (4, PASSED + TRACER), "C/D.E/0  # GetParam() = 0": (17, PASSED + TRACER)},
         (0, "4,17")),
        ("a real failure beside one", {"A.B": (4, PASSED + TRACER),
                                       "F.G": (5, "[  FAILED  ] F.G\n")}, (1, "")),
        ("a leak report", {"A.B": (4, PASSED + "ERROR: LeakSanitizer: detected memory leaks\n"
                                   + TRACER)}, (1, "")),
        ("half the signature", {"A.B": (4, PASSED + "Tracer caught signal 11\n")}, (1, "")),
        ("a program the test ran crashed so",
         {"A.B": (4, "[ RUN      ] T.A\n" + TRACER + "x.cc:9: Failure\nExpected equality\n"
                  "  exit_code\n    Which is: 1\n[  FAILED  ] T.A\n")}, (0, "4")),
        ("a failure with no signature", {"A.B": (4, "[ RUN      ] T.A\n[  FAILED  ] T.A\n")},
         (1, "")),
        ("a UBSan report", {"A.B": (4, "x.cc:1: runtime error: overflow\n" + PASSED + TRACER)},
         (1, "")),
        ("nothing failed", {}, (1, "")),
    ]
    bad = 0
    for what, failed, expected in cases:
        got = verdict(failed)
        if got != expected:
            print(f"FAIL {what}: expected {expected}, got {got}")
            bad += 1
        else:
            print(f"ok   {what}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
