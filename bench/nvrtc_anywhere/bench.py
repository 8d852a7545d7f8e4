"""bench/nvrtc_anywhere: NVRTC compiles in a new process, with and without kcache's stand-in.

Run by hand (not in CI):
    scripts/venv-python bench/nvrtc_anywhere/bench.py [--pods 3]
        [--kcache B/client/cli/kcache --kcached B/daemon/kcached]

A new process compiles, through cuda-python's NVRTC bindings (as CuPy, cuda.core and DeepGEMM
reach NVRTC), each program to a CUBIN for sm_89:
  elementwise  8 distinct CuPy-style elementwise kernels
  cub          a block reduction with CUB (the toolkit's headers on -I)
  headers      a kernel including 12 headers found in 12 -I directories on disk
with:
  none      the real NVRTC alone (kcache run --no-nvrtc): what every new process pays today
  kcache    kcache's stand-in in a new pod: a first process under `kcache run --store` (the
            image's bake) stored every compile; each pod is a new kcached over that store baked,
            a new state directory (so the pod's first compile digests what NVRTC loads once), and
            a new process under `kcache run --server`
It prints, per program, the median milliseconds of a compile in each mode (a pod's first compile
left out) and the ratio, each pod's first compile, and how many compiles were stored and served.

Then CuPy's own path: a new process gets the 8 elementwise kernels as a RawKernel does
(cupy.cuda.compiler._compile_with_cache_cuda: CuPy names each program in a new temporary
directory, and compiles an empty program first in each process, its check of NVRTC's version):
  cupy none   CuPy's cache ($CUPY_CACHE_DIR) empty, no kcache
  cupy own    CuPy's cache warm on the same disk (an earlier process filled it), no kcache
  cupy kcache CuPy's cache empty (a new pod), kcache's stand-in serving as above
Loading the module needs a GPU: it is left out (a no-op in its place), and CuPy is told the
-arch an sm_89 would give. Both rows without kcache preload the toolkit's NVRTC, the one kcache
forwards to. cuda.core keeps no cache of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What each new process runs: compiles every program, timing each compile, and prints JSON.
CHILD = r"""
import json, sys, time
from cuda.bindings import nvrtc
programs = json.loads(open(sys.argv[1]).read())
times = []
for p in programs:
    headers = [h.encode() for h in p.get("headers", [])]
    started = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(p["source"].encode(), p["name"].encode(), 0, [], [])
    opts = [o.encode() for o in p["options"]]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        e, n = nvrtc.nvrtcGetProgramLogSize(prog); log = b" " * n
        nvrtc.nvrtcGetProgramLog(prog, log)
        sys.exit(f"{p['name']}: {err}: {log.decode(errors='replace')}")
    err, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    times.append((p["group"], (time.perf_counter() - started) * 1e3))
    nvrtc.nvrtcDestroyProgram(prog)
print("RESULT " + json.dumps(times))
"""

# CuPy's RawKernel compile of each program, per process, with the module's load (which needs a
# GPU) left out; prints each kernel's milliseconds.
CUPY_CHILD = r"""
import json, sys, time, types
from cupy.cuda import compiler
compiler._get_arch_for_options_for_nvrtc = lambda arch=None: (f"-arch=sm_{arch}", "cubin")
class Module:  # cupy.cuda.function.Module without the GPU: the compile and CuPy's cache are real
    def load(self, cubin): pass
    def _set_mapping(self, mapping): pass
compiler.function = types.SimpleNamespace(Module=Module)
programs = [p for p in json.loads(open(sys.argv[1]).read()) if p["group"] == "elementwise"]
times = []
for p in programs:
    started = time.perf_counter()
    compiler._compile_with_cache_cuda(p["source"], ("-std=c++17",), "89")
    times.append(("cupy", (time.perf_counter() - started) * 1e3))
print("RESULT " + json.dumps(times))
"""

ELEMENTWISE = [
    ("add_f32", "float", "y[i] = a[i] + b[i];"),
    ("mul_f32", "float", "y[i] = a[i] * b[i];"),
    ("axpy_f32", "float", "y[i] = 2.5f * a[i] + b[i];"),
    ("relu_f32", "float", "y[i] = a[i] > 0 ? a[i] : 0;"),
    ("add_f64", "double", "y[i] = a[i] + b[i];"),
    ("sqrt_f32", "float", "y[i] = sqrtf(a[i] * a[i] + b[i] * b[i]);"),
    ("exp_f32", "float", "y[i] = expf(a[i]) - b[i];"),
    ("max_i32", "int", "y[i] = max(a[i], b[i]);"),
]

CUB = """
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void block_sum(const float* in, float* out) {
  using Reduce = cub::BlockReduce<float, 256>;
  __shared__ typename Reduce::TempStorage storage;
  float total = Reduce(storage).Sum(in[blockIdx.x * 256 + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""


def programs(work: Path, toolkit: str) -> list[dict]:
    arch = "--gpu-architecture=sm_89"
    out = []
    for name, type_, body in ELEMENTWISE:
        source = (f'extern "C" __global__ void {name}(const {type_}* a, const {type_}* b, '
                  f"{type_}* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; "
                  f"if (i < n) {{ {body} }} }}\n")
        out.append({"group": "elementwise", "name": f"{name}.cu", "source": source,
                    "options": [arch, "-std=c++17"]})
    out.append({"group": "cub", "name": "block_sum.cu", "source": CUB,
                "options": [arch, "-std=c++17", f"-I{toolkit}/include", f"-I{toolkit}/include/cccl"]})
    includes, source = [], ""
    for i in range(12):
        d = work / "headers" / f"dir{i}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"part{i}.h").write_text(f"constexpr float kPart{i} = {i}.5f;\n")
        includes.append(f"-I{d}")
        source += f'#include "part{i}.h"\n'
    source += ('extern "C" __global__ void parts(float* y) { y[threadIdx.x] = ' +
               " + ".join(f"kPart{i}" for i in range(12)) + "; }\n")
    out.append({"group": "headers", "name": "parts.cu", "source": source,
                "options": [arch, *includes]})
    return out


def run(env: dict, prefix: list[str], progs: Path, child: str = CHILD) -> tuple[list, str]:
    full = {**os.environ, **env}
    proc = subprocess.run([*prefix, sys.executable, "-c", child, str(progs)], env=full,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(prefix)} failed:\n{proc.stdout}\n{proc.stderr}")
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=3)
    parser.add_argument("--kcache", default=str(ROOT / "build/client/cli/kcache"))
    parser.add_argument("--kcached", default=str(ROOT / "build/daemon/kcached"))
    parser.add_argument("--toolkit", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kcache-nvrtc-bench.") as tmp_name:
        tmp = Path(tmp_name)
        listed = programs(tmp, args.toolkit)
        progs = tmp / "programs.json"
        progs.write_text(json.dumps(listed))
        shims = ["--shims", str(tmp / "shims")]
        none = []
        for pod in range(args.pods):
            times, _ = run({"KCACHE_STATE_DIR": str(tmp / f"none{pod}")},
                           [args.kcache, "run", "--no-nvrtc", "--store", str(tmp / "unused"),
                            *shims, "--"], progs)
            none.append(times)
        store = tmp / "baked"
        _, bake_log = run({"KCACHE_STATE_DIR": str(tmp / "bake-state"), "KCACHE_LOG": "1"},
                          [args.kcache, "run", "--store", str(store), *shims, "--"], progs)
        stored = bake_log.count("kcache: nvrtc: stored ")
        if os.environ.get("KCACHE_BENCH_DEBUG"):
            print(bake_log)
        # CuPy's path: its own cache, and a bake of what it compiles into the same store.
        toolkit_nvrtc = {"LD_PRELOAD": f"{args.toolkit}/lib64/libnvrtc.so.13"}
        cupy_none, cupy_own = [], []
        for pod in range(args.pods):
            times, _ = run({**toolkit_nvrtc, "CUPY_CACHE_DIR": str(tmp / f"cupy-none{pod}")}, [],
                           progs, CUPY_CHILD)
            cupy_none.append(times)
            times, _ = run({**toolkit_nvrtc, "CUPY_CACHE_DIR": str(tmp / "cupy-own")}, [], progs,
                           CUPY_CHILD)
            if pod > 0:  # the first filled CuPy's cache
                cupy_own.append(times)
        _, bake_log = run({"KCACHE_STATE_DIR": str(tmp / "bake-state"), "KCACHE_LOG": "1",
                           "CUPY_CACHE_DIR": str(tmp / "cupy-bake")},
                          [args.kcache, "run", "--store", str(store), *shims, "--"], progs,
                          CUPY_CHILD)
        stored += bake_log.count("kcache: nvrtc: stored ")
        pods, cupy_pods, served_lines = [], [], 0
        for pod in range(args.pods):
            socket = tmp / f"pod{pod}.sock"
            daemon = subprocess.Popen(
                [args.kcached, "--store", str(tmp / f"pod-store{pod}"), "--baked", str(store),
                 "--no-toolkit", "--listen", f"unix://{socket}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.time() + 30
                while not Path(f"{socket}.fast").exists() and time.time() < deadline:
                    time.sleep(0.05)
                prefix = [args.kcache, "run", "--server", f"unix://{socket}", *shims, "--"]
                times, log = run({"KCACHE_STATE_DIR": str(tmp / f"pod-state{pod}"),
                                  "KCACHE_LOG": "1"}, prefix, progs)
                cupy_times, cupy_log = run({"KCACHE_STATE_DIR": str(tmp / f"pod-state{pod}"),
                                            "KCACHE_LOG": "1",
                                            "CUPY_CACHE_DIR": str(tmp / f"cupy-pod{pod}")},
                                           prefix, progs, CUPY_CHILD)
            finally:
                daemon.terminate()
                daemon.wait(30)
            pods.append(times)
            cupy_pods.append(cupy_times)
            if os.environ.get("KCACHE_BENCH_DEBUG"):
                print(log + cupy_log)
            served_lines += log.count("served by kcache") + cupy_log.count("served by kcache")
        print(f"{'program':<12} {'none ms':>9} {'kcache ms':>10} {'none/kcache':>12}")
        for group in ("elementwise", "cub", "headers"):
            # A pod's first compile digests what NVRTC loads: shown apart below.
            n = [ms for times in none for g, ms in times if g == group]
            k = [ms for times in pods for i, (g, ms) in enumerate(times) if g == group and i > 0]
            print(f"{group:<12} {statistics.median(n):9.1f} {statistics.median(k):10.2f} "
                  f"{statistics.median(n) / statistics.median(k):12.0f}x")
        firsts = ", ".join(f"{times[0][1]:.0f}" for times in pods)
        print(f"a pod's first compile (an elementwise kernel; it digests NVRTC's builtins): "
              f"{firsts} ms")
        elementwise = sum(1 for p in listed if p["group"] == "elementwise")
        # CuPy compiles an empty program before its first kernel in each process: 2 + 7 more.
        compiles = (len(listed) + elementwise + 1) * args.pods
        print(f"stored {stored} compiles at the bakes; served {served_lines} of {compiles} "
              f"compiles in the pods")
        print()
        print("CuPy's RawKernel path, per kernel (a process's first kernel apart: it also compiles "
              "CuPy's empty program)")
        print(f"{'mode':<12} {'ms':>9} {'first ms':>9}")
        for mode, runs in (("cupy none", cupy_none), ("cupy own", cupy_own),
                           ("cupy kcache", cupy_pods)):
            later = [ms for times in runs for i, (_, ms) in enumerate(times) if i > 0]
            firsts = [times[0][1] for times in runs]
            print(f"{mode:<12} {statistics.median(later):9.2f} {statistics.median(firsts):9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
