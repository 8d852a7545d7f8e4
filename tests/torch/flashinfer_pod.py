"""FlashInfer module builds as an image build or a new pod runs them, for
tests/torch/flashinfer_jit_test.py and bench/inference_jit: deploy/tools/flashinfer_warm.py in a
new process with its own workspace, and a new kcached over a baked store on a temp unix socket."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

WARM = Path(__file__).resolve().parents[2] / "deploy" / "tools" / "flashinfer_warm.py"
# Variables of FlashInfer, kcache and the compiler caches the caller's environment may hold:
# each build starts without them and gets only what it is given.
OWN_PREFIXES = ("FLASHINFER_", "KCACHE_", "CCACHE_", "SCCACHE_")


def build(generators: list[str], workspace: Path, env_extra: dict,
          prefix: list[str] | None = None) -> tuple[float, str]:
    """Builds the modules of `generators` with FLASHINFER_WORKSPACE_BASE=workspace and
    KCACHE_LOG=1, under `prefix` (e.g. `kcache run ... --`); returns the process's wall seconds
    and its output (ninja's commands, the launchers' KCACHE_LOG lines). Exits on failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_PREFIXES)}
    # Whether kcache run serves and captures the cache directories is the test's to say
    # (tests/CMakeLists.txt: not those of the machine's HOME).
    if "KCACHE_CACHE_DIRS" in os.environ:
        env["KCACHE_CACHE_DIRS"] = os.environ["KCACHE_CACHE_DIRS"]
    env.update(FLASHINFER_WORKSPACE_BASE=str(workspace), KCACHE_LOG="1", **env_extra)
    start = time.monotonic()
    result = subprocess.run([*(prefix or []), sys.executable, str(WARM), "--verbose", *generators],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=3600)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"the FlashInfer build failed (exit {result.returncode}):\n{result.stdout}")
    return seconds, result.stdout


def module_so(workspace: Path, module: str) -> Path:
    """The one <module>.so FlashInfer built under `workspace`."""
    found = list(workspace.glob(f".cache/flashinfer/*/*/cached_ops/{module}/{module}.so"))
    if len(found) != 1:
        sys.exit(f"expected one {module}.so under {workspace}, found {found}")
    return found[0]


def kcache_lines(output: str, word: str) -> list[str]:
    """The launchers' KCACHE_LOG lines of one kind: hit, miss, uncached, stored."""
    return [line for line in output.splitlines() if line.startswith(f"kcache: {word} ")]


def uncached_compiles(output: str) -> list[str]:
    """KCACHE_LOG's uncached lines but not_a_compile (FlashInfer's `nvcc --version`)."""
    return [line for line in kcache_lines(output, "uncached") if "(not_a_compile)" not in line]


def start_baked_kcached(kcached: str, baked: Path, tmp: Path) -> tuple[subprocess.Popen, Path]:
    """A new kcached over `baked` (read-only) and an empty writable store, as a new pod's
    sidecar: listening on tmp/kcache.sock, logging to tmp/kcached.log. Exits when it does not
    start within 30 s."""
    tmp.mkdir(parents=True, exist_ok=True)
    socket = tmp / "kcache.sock"
    with open(tmp / "kcached.log", "wb") as log:
        daemon = subprocess.Popen([kcached, "--store", str(tmp / "store"), "--baked", str(baked),
                                   "--no-toolkit", "--listen", f"unix://{socket}"],
                                  stdout=log, stderr=subprocess.STDOUT)
    give_up = time.monotonic() + 30
    while not socket.exists():
        if daemon.poll() is not None or time.monotonic() > give_up:
            daemon.kill()
            sys.exit("kcached did not start:\n" + (tmp / "kcached.log").read_text())
        time.sleep(0.05)
    return daemon, socket


def uncached_counted(counters: dict) -> dict:
    """kcached's objects.uncached_* counters that are not zero, but not_a_compile."""
    return {k: v for k, v in counters.items() if k.startswith("objects.uncached_") and v
            and k != "objects.uncached_not_a_compile"}


def build_seconds(output: str) -> float:
    """The seconds flashinfer_warm.py says its modules' builds took, together (the process's
    wall time less Python's start, the imports and the generators' lookup)."""
    return sum(float(s) for s in re.findall(r"^flashinfer_warm: built \S+ in ([0-9.]+) s$",
                                            output, re.MULTILINE))
