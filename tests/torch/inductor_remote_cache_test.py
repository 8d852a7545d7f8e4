"""torch.compile on the CPU (Inductor's C++ backend) with its FX-graph cache served by kcached's
Redis door, end to end.

Two fresh Python processes, each with empty local caches (TORCHINDUCTOR_CACHE_DIR, a new pod's),
compile the same small function through `kcache run --server ... --redis` (nothing else
configures Inductor; kcached's door is on a unix socket, which `--redis` alone asks kcached for
and Inductor reaches through TORCHINDUCTOR_REDIS_URL): the first misses and stores its graph in kcached, the second gets an
AOTAutograd and an FX-graph cache hit from it (torch's own counters), and every C++ build the
first stored through kcache's compiler launchers (kcached's objects.* counters). Each process's wall time is printed, not
asserted. Exits 125 (skipped) when torch or redis-py is not importable.

Usage: inductor_remote_cache_test.py KCACHE KCACHED
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from door_daemon import start_kcached
from kcache_stat import object_counters

COMPILE = """
import json, torch
from torch._dynamo.utils import counters
def f(x, y):
    return (torch.sin(x) + y).relu() * 2
x, y = torch.randn(64), torch.randn(64)
torch.testing.assert_close(torch.compile(f)(x, y), f(x, y))
print("COUNTERS " + json.dumps({**counters["inductor"], **counters["aot_autograd"]}))
"""


def compile_in_a_new_pod(kcache: str, tmp: Path) -> tuple[dict, float]:
    # Pods of one image see the same paths with nothing in them: Inductor's cache directory, the
    # temp dir (its precompiled headers, 150 MB each, go there whatever TORCHINDUCTOR_CACHE_DIR
    # says) and kcache's state directory. Inductor's C++ commands hold those paths (-g1 keys the
    # working directory), so a pod hits kcache where its paths are the image's.
    box = tmp / "pod"
    shutil.rmtree(box, ignore_errors=True)
    (box / "tmp").mkdir(parents=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(box / "inductor"),
               TRITON_CACHE_DIR=str(box / "triton"), TMPDIR=str(box / "tmp"),
               KCACHE_STATE_DIR=str(box / "state"))
    start = time.monotonic()
    result = subprocess.run([kcache, "run", "--server", f"unix://{tmp}/kcache.sock", "--redis",
                             "--", sys.executable, "-c", COMPILE],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=600, cwd=box)
    lines = [line for line in result.stdout.splitlines() if line.startswith("COUNTERS ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"torch.compile in a new pod failed (exit {result.returncode}):\n{result.stdout}")
    return json.loads(lines[-1][len("COUNTERS "):]), time.monotonic() - start


def main() -> int:
    try:
        import redis  # noqa: F401  (Inductor's remote cache client)
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return 125
    kcache, kcached = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="kcache-inductor-") as tmp_name:
        tmp = Path(tmp_name)
        daemon = start_kcached(kcached, tmp)
        try:
            first, first_seconds = compile_in_a_new_pod(kcache, tmp)
            after_first = object_counters(kcache, tmp / "kcache.sock")
            second, second_seconds = compile_in_a_new_pod(kcache, tmp)
            after_second = object_counters(kcache, tmp / "kcache.sock")
        finally:
            daemon.terminate()
            daemon.wait(30)
        print(f"first pod: {first}, {first_seconds:.1f} s\n"
              f"second pod: {second}, {second_seconds:.1f} s "
              f"({second_seconds / first_seconds:.2f} of the first)")
        if first.get("fxgraph_cache_miss", 0) < 1 or first.get("fxgraph_cache_hit", 0) != 0:
            sys.exit("the first pod should miss Inductor's FX-graph cache")
        if second.get("fxgraph_cache_hit", 0) < 1 or second.get("fxgraph_cache_miss", 0) != 0:
            sys.exit("the second pod should hit the FX-graph cache kcached served")
        # AOTAutograd's entry points at the FX graph: a hit skips the tracing before it.
        if first.get("autograd_cache_miss", 0) < 1 or first.get("autograd_cache_hit", 0) != 0:
            sys.exit("the first pod should miss AOTAutograd's cache")
        if second.get("autograd_cache_hit", 0) < 1 or second.get("autograd_cache_miss", 0) != 0:
            sys.exit("the second pod should hit the AOTAutograd cache kcached served")
        # Inductor's C++ (instruction-set probes and the kernel, each compiled and linked into a
        # .so with -march=native, and its precompiled header): stored by the first pod, every
        # one served to the second, which compiles none.
        stored = after_first.get("objects.stored", 0)
        served = after_second.get("objects.served", 0) - after_first.get("objects.served", 0)
        print(f"launchers: {after_first} then {after_second}")
        if stored < 2:
            sys.exit(f"the first pod should store Inductor's C++ builds: {after_first}")
        if served != stored or after_second.get("objects.stored", 0) != stored:
            sys.exit(f"the second pod should get all {stored} C++ builds from kcached, got "
                     f"{served}: {after_second}")
        print("OK: the second pod's graphs came from kcached's Redis door, its C++ builds from "
              "kcached's object store")
    return 0


if __name__ == "__main__":
    sys.exit(main())
