"""bench/torch_compile: torch.compile's first forward in a new pod, with and without kcached.

Run by hand (not in CI):
    scripts/venv-python bench/torch_compile/bench.py [--device cuda|cpu] [--runs N]
        [--kcache build/client/cli/kcache --kcached build/daemon/kcached] [--profile DIR]

--device cuda (the default; exits 125 without a GPU): a 6-layer GPT-2 in fp16 (transformers'
config, random weights, batch 1 × 128 tokens; Inductor generates Triton kernels). --device cpu: a
small MLP through Inductor's C++ backend. Each row is a fresh Python process, a pod, timing its
first forward through torch.compile (tracing, Inductor, Triton or the C++ compiler, and the
forward itself; the imports are timed apart):
  cold        empty TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (a new pod, no cache)
  local warm  the local caches the cold run left (the same pod started again): the goal's yardstick
  kcache      empty local caches, routed through a kcached's Redis door by `kcache run --server
              ADDR --redis ADDR` alone (Inductor's FX-graph and autotune remote caches, Triton's
              RemoteCacheManager with kcache.triton:Backend); a first pod fills kcached ("fill"),
              the measured ones are new pods after it
It prints seconds, the ratio to local warm, and Inductor's own cache counters for each row. The
goal (docs/torch-compile.md, "Measured"): a new pod through kcached within 10% of local warm. Needs torch, redis-py (Inductor's remote-cache client) and, for cuda, transformers
and Triton; the kcache Python package must be importable (Triton imports the backend).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "torch"))
from door_daemon import free_port, start_kcached  # noqa: E402  (kcached with its Redis door)

# One pod: imports, then the first forward through torch.compile, timed; prints one JSON line.
POD = """
import json, os, sys, time
start = time.monotonic()
import torch
from torch._dynamo.utils import counters
device = sys.argv[1]
if device == "cuda":
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=6)).to("cuda", torch.float16).eval()
    inputs = (torch.randint(0, 50257, (1, 128), device="cuda"),)
else:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.LayerNorm(512), torch.nn.Linear(512, 256)).eval()
    inputs = (torch.randn(8, 256),)
profile_to = os.environ.get("KCACHE_BENCH_PROFILE")
if profile_to:
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
imported = time.monotonic()
compiled = torch.compile(model)
with torch.no_grad():
    out = compiled(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
first = time.monotonic()
if profile_to:
    import io, pstats
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).sort_stats("cumulative")
    stats.print_stats(60)
    stats.sort_stats("tottime").print_stats(30)
    with open(profile_to, "w") as f:
        f.write(text.getvalue())
with torch.no_grad():
    compiled(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
print("POD " + json.dumps({"import_s": imported - start, "first_forward_s": first - imported,
                           "second_forward_s": time.monotonic() - first,
                           "inductor": {**counters["inductor"], **counters["aot_autograd"]}}))
"""


def pod(device: str, dirs: Path, prefix: list[str], profile: Path | None = None,
        fresh: bool = False) -> dict:
    """Runs one pod with its local caches under `dirs`; returns its JSON line. Every pod uses
    the same `dirs`, as pods of one image see the same paths (/tmp/torchinductor_$USER, ...);
    `fresh` empties it first (a new pod), else the previous pod's caches are kept (the same
    pod started again). Inductor's C++ commands hold their paths (-g1 keys the working
    directory), so a new pod hits kcache only where its paths are the image's. With
    `profile`, the pod writes cProfile's top functions of its first forward (cumulative, then
    own time) there; its row's time then includes the profiler's cost."""
    if fresh:
        shutil.rmtree(dirs, ignore_errors=True)
    # A new pod's /tmp is empty too (Inductor keeps its precompiled headers there), and so is
    # kcache's state directory (the launchers' file-digest memo).
    (dirs / "tmp").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(dirs / "inductor"),
               TRITON_CACHE_DIR=str(dirs / "triton"), TMPDIR=str(dirs / "tmp"),
               KCACHE_STATE_DIR=str(dirs / "kcache-state"), PYTHONUNBUFFERED="1")
    env.pop("KCACHE_BENCH_PROFILE", None)
    if profile:
        env["KCACHE_BENCH_PROFILE"] = str(profile)
    result = subprocess.run([*prefix, sys.executable, "-c", POD, device], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=1800, cwd=dirs)
    lines = [line for line in result.stdout.splitlines() if line.startswith("POD ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"a pod failed (exit {result.returncode}):\n{result.stdout[-6000:]}")
    return json.loads(lines[-1][len("POD "):])


def door_counters(kcache: str, server: str) -> dict:
    """kcached's Redis-door and compiler-launcher counters (`kcache stat --server --json`, the
    `redis.*` and `objects.*` ones)."""
    result = subprocess.run([kcache, "stat", "--server", server, "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        return {"stat failed": result.stdout.strip()[-200:]}
    counters = json.loads(result.stdout)["counters"]
    return {k: v for k, v in counters.items()
            if k.startswith(("redis.", "objects.")) and v}


def gpu_present() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return probe.stdout.strip() == "True"


def row(name: str, results: list[dict], baseline: float | None) -> float:
    seconds = statistics.median(r["first_forward_s"] for r in results)
    ratio = f"{seconds / baseline:5.2f}" if baseline else "  -  "
    counts = results[-1]["inductor"]
    hits = {k: v for k, v in counts.items() if "cache" in k}
    print(f"{name:<22} {seconds:8.2f} s  {ratio}   import {results[-1]['import_s']:5.1f} s   "
          f"{json.dumps(hits, sort_keys=True)}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--runs", type=int, default=2, help="measured pods per warm row")
    parser.add_argument("--kcache", default=str(ROOT / "build" / "client" / "cli" / "kcache"))
    parser.add_argument("--kcached", default=str(ROOT / "build" / "daemon" / "kcached"))
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="after the rows, one more local-warm pod and one more new pod "
                        "under cProfile, each writing its top functions to DIR (where the "
                        "difference between them goes)")
    args = parser.parse_args()
    try:
        import redis  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (needs torch and redis-py)")
        return 125
    if args.device == "cuda" and not gpu_present():
        print("skipped: no GPU (torch.cuda.is_available() is False); try --device cpu")
        return 125
    with tempfile.TemporaryDirectory(prefix="kcache-bench-compile-") as tmp_name:
        tmp = Path(tmp_name)
        print(f"torch.compile first forward, --device {args.device}, median of {args.runs} "
              f"pods per warm row (ratio to local warm)")
        box = tmp / "pod"  # the paths every pod of the image sees
        cold = pod(args.device, box, [], fresh=True)
        warm = [pod(args.device, box, []) for _ in range(args.runs)]
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            pod(args.device, box, [], args.profile / "local-warm.txt")
        port = free_port()
        daemon = start_kcached(args.kcached, tmp, port)
        through = [args.kcache, "run", "--server", f"unix://{tmp}/kcache.sock", "--redis",
                   f"127.0.0.1:{port}", "--"]
        try:
            fill = pod(args.device, box, through, fresh=True)
            served = [pod(args.device, box, through, fresh=True) for _ in range(args.runs)]
            counters = door_counters(args.kcache, f"unix://{tmp}/kcache.sock")
            if args.profile:
                pod(args.device, box, through, args.profile / "new-pod.txt", fresh=True)
        finally:
            daemon.terminate()
            daemon.wait(30)
        baseline = statistics.median(r["first_forward_s"] for r in warm)
        row("cold", [cold], baseline)
        row("local warm", warm, baseline)
        row("kcache, first pod", [fill], baseline)
        new_pod = row("kcache, new pod", served, baseline)
        print("kcached's door and launchers: " + ", ".join(f"{k}={v}" for k, v in sorted(counters.items())))
        print(f"goal: a new pod through kcached within 10% of local warm: "
              f"{new_pod / baseline:.2f} ({'met' if new_pod <= 1.10 * baseline else 'not met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
