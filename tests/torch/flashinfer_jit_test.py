"""FlashInfer's JIT through kcache's compiler launchers, end to end.

One module, gen_concat_mla_module (one .cu and the link: the quickest of FlashInfer's
zero-argument modules to build, ~8 s on 2 cores), built by deploy/tools/flashinfer_warm.py:
  1. without kcache, for reference;
  2. at image build, recorded with `kcache run --store --arch 9.0` (nvcc through
     FLASHINFER_NVCC_LAUNCHER, the link through CXX);
  3. in a pod: a fresh FLASHINFER_WORKSPACE_BASE at another path, a new kcached over that
     store baked, an empty state directory, `kcache run --server`.
The pod must hit every command the image recorded and miss none, kcached must count no compile
run uncached (FlashInfer's `nvcc --version`, asked for the CUDA version, is no compile), and
the pod's .so must be the image's bytes and equal the reference once nvcc's temporary-file
names are masked: nvcc compiles the host side from `tmpxft_<pid>_<counter>-..._<file>.cudafe1.cpp`
and that name lands in the object (the file symbol, the static initializer
`_GLOBAL__sub_I_tmpxft_...`), so two builds without kcache differ in exactly those bytes.
Exits 125 (skipped) when flashinfer is not importable.

Usage: flashinfer_jit_test.py KCACHE KCACHED
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARM = Path(__file__).resolve().parents[2] / "deploy" / "tools" / "flashinfer_warm.py"
GENERATOR, MODULE = "gen_concat_mla_module", "concat_mla"
TEMP_NAME = re.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")


def build(workspace: Path, prefix: list[str], env_extra: dict) -> str:
    """Runs flashinfer_warm.py (under `prefix`, a `kcache run ... --`) with a clean FlashInfer
    and kcache environment; returns its output (ninja's commands and KCACHE_LOG lines)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FLASHINFER_", "KCACHE_"))}
    env.update(FLASHINFER_WORKSPACE_BASE=str(workspace), KCACHE_LOG="1", **env_extra)
    result = subprocess.run([*prefix, sys.executable, str(WARM), "--verbose", GENERATOR],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=900)
    if result.returncode != 0 or f"built {GENERATOR}" not in result.stdout:
        sys.exit(f"the build failed (exit {result.returncode}):\n{result.stdout}")
    return result.stdout


def module_so(workspace: Path) -> bytes:
    found = list(workspace.glob(f".cache/flashinfer/*/*/cached_ops/{MODULE}/{MODULE}.so"))
    if len(found) != 1:
        sys.exit(f"expected one {MODULE}.so under {workspace}, found {found}")
    return found[0].read_bytes()


def log_lines(output: str, word: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(f"kcache: {word} ")]


def start_kcached(kcached: str, tmp: Path) -> tuple[subprocess.Popen, Path]:
    socket = tmp / "kcache.sock"
    log = open(tmp / "kcached.log", "wb")
    daemon = subprocess.Popen([kcached, "--store", str(tmp / "pod-store"), "--baked",
                               str(tmp / "baked"), "--no-toolkit", "--listen", f"unix://{socket}"],
                              stdout=log, stderr=subprocess.STDOUT)
    give_up = time.monotonic() + 30
    while not socket.exists():
        if daemon.poll() is not None or time.monotonic() > give_up:
            daemon.kill()
            sys.exit("kcached did not start:\n" + (tmp / "kcached.log").read_text())
        time.sleep(0.05)
    return daemon, socket


def object_counters(kcache: str, socket: Path) -> dict:
    stat = subprocess.run([kcache, "stat", "--server", f"unix://{socket}", "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if stat.returncode != 0:
        sys.exit(f"kcache stat failed: {stat.stdout}")
    return {k: v for k, v in json.loads(stat.stdout)["counters"].items()
            if k.startswith("objects.")}


def main() -> int:
    try:
        import flashinfer.jit  # noqa: F401
    except ImportError as e:
        print(f"skipped: flashinfer is not importable ({e})")
        return 125
    kcache, kcached = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="kcache-flashinfer-") as tmp_name:
        tmp = Path(tmp_name)
        build(tmp / "reference", [], {"FLASHINFER_CUDA_ARCH_LIST": "9.0"})
        reference = module_so(tmp / "reference")

        shims = ["--shims", str(tmp / "shims"), "--arch", "9.0", "--"]
        image = build(tmp / "image", [kcache, "run", "--store", str(tmp / "baked"), *shims],
                      {"KCACHE_STATE_DIR": str(tmp / "state")})
        recorded = len(log_lines(image, "miss"))
        if recorded != 2 or log_lines(image, "hit"):  # the .cu and the link
            sys.exit(f"image build: expected 2 misses and no hit, got:\n{image}")

        daemon, socket = start_kcached(kcached, tmp)
        try:
            start = time.monotonic()
            pod = build(tmp / "pod" / "home" / "other",
                        [kcache, "run", "--server", f"unix://{socket}", *shims],
                        {"KCACHE_STATE_DIR": str(tmp / "pod-state")})
            seconds = time.monotonic() - start
            counters = object_counters(kcache, socket)
        finally:
            daemon.terminate()
            daemon.wait(30)

        for name, output in (("image build", image), ("pod", pod)):
            compiles = [line for line in log_lines(output, "uncached")
                        if "(not_a_compile)" not in line]
            if compiles:
                sys.exit(f"{name}: commands ran uncached:\n" + "\n".join(compiles))
        if len(log_lines(pod, "hit")) != recorded or log_lines(pod, "miss"):
            sys.exit(f"pod: expected {recorded} hits and no miss, got:\n{pod}")
        uncached = {k: v for k, v in counters.items()
                    if k.startswith("objects.uncached_") and k != "objects.uncached_not_a_compile"
                    and v}
        if (uncached or counters.get("objects.served") != recorded
                or counters.get("objects.stored", 0) != 0):
            sys.exit(f"kcached: expected {recorded} served, none stored and no compile "
                     f"uncached, counted {counters}")

        served = module_so(tmp / "pod" / "home" / "other")
        if served != module_so(tmp / "image"):
            sys.exit(f"the pod's {MODULE}.so is not the image build's")
        mask = b"tmpxft_XXXXXXXX_XXXXXXXX"
        if TEMP_NAME.sub(mask, served) != TEMP_NAME.sub(mask, reference):
            sys.exit(f"the pod's {MODULE}.so differs from a build without kcache beyond "
                     "nvcc's temporary-file names")
        print(f"ok: the image recorded {recorded} commands; the pod hit all of them in "
              f"{seconds:.2f} s and its {MODULE}.so ({len(served)} bytes) is the image's, and a "
              "build without kcache's but for nvcc's temporary-file names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
