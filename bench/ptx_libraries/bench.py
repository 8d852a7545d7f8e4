"""bench/ptx_libraries: loading a library that ships only PTX, with and without kcache.

Run by hand (not in CI), after a build (it uses the build tree's kcache, kcached, and the load
program and fake driver tests/CMakeLists.txt builds):
    scripts/venv-python bench/ptx_libraries/bench.py [--runs 5] [--build build]

The library: the bundled kernels (kernels/manifest.yaml), each built to compute_80 PTX only
(`kcache warm --arch compute_80`, the PTX taken out with `kcache get`) and wrapped in a fatbin of
its own with the toolkit's fatbinary, as a library built for `compute_80` ships them. At image
build `kcache warm --library` compiles their SASS for the target into a store (timed: its
seconds per module). Each load is tests/cuda/cuda_load_program in a new process
(cuModuleLoadData of the fatbin; CUDA_MODULE_LOADING=EAGER), its load's milliseconds.

On a GPU (the real driver answers cuInit), for each kernel, the median of --runs loads:
  jit         the driver JIT-compiles the PTX: CUDA_CACHE_DISABLE=1, what a new pod pays
  warm-cache  the driver's own cache warm (CUDA_CACHE_PATH filled by a first load)
  kcache      under `kcache run --server` (a kcached over the store), CUDA_CACHE_DISABLE=1
  sass        the SASS kcache holds, loaded directly (the floor)
and the ratios: kcache / warm-cache (goal <= 1.2), jit / kcache (goal >= 50 for moe_routing,
which uses CUB), kcache / sass (<= 2).

Without a GPU (this part runs everywhere), the load path's own cost, against the recording
fake driver (tests/cuda/fake_libcuda.c, which does no JIT): loads with the fake alone, through
kcache's stand-in served from kcached, and through the stand-in on a miss (a GPU the store was
not warmed for), with its PTX sent to be built (a `kcache cuda-build-ptx` process per module,
not waited for; this kcached compiles nothing and refuses it) and not (KCACHE_CUDA_BUILD=0). A process's first load (moe_routing's module: it loads libkcache-cuda.so and
connects to kcached) and its later ones (the other kernels' modules, in the same process) are
reported apart, in milliseconds over the fake alone. The fake's context takes 100 ms to create
(FAKE_CUDA_CONTEXT_MS), as a real first context does: the stand-in loads its cache half during
it (after cuInit).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CUB_KERNEL = "moe_routing"


def run(args: list[str], env: dict | None = None, check: bool = True) -> str:
    done = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}")
    return done.stdout


def kernel_names() -> list[str]:
    text = (ROOT / "kernels" / "manifest.yaml").read_text()
    return re.findall(r"^  - name: (\S+)", text, re.M)


def gpu_sm() -> str | None:
    """The first GPU's SM ("9.0") when a real driver answers, else None."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if cuda.cuInit(0) != 0:
        return None
    major, minor, device = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device)
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device)
    return f"{major.value}.{minor.value}"


def load_ms(program: Path, fatbin: Path, env: dict, prefix: list[str] | None = None) -> float:
    out = run([*(prefix or []), str(program), "data", str(fatbin)], env=env)
    m = re.search(r"result (\d+) load_ms ([0-9.]+)", out)
    if m is None or m.group(1) != "0":
        sys.exit(f"the load of {fatbin} failed:\n{out}")
    return float(m.group(2))


def median_ms(times: list[float]) -> str:
    return f"{statistics.median(times):8.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="loads per kernel and mode (median)")
    parser.add_argument("--build", default=str(ROOT / "build"), help="the build tree")
    args = parser.parse_args()
    build = Path(args.build)
    kcache, kcached = build / "client/cli/kcache", build / "daemon/kcached"
    program, fake = build / "tests/cuda_load_program", build / "tests/fake-cuda"
    for needed in (kcache, kcached, program, fake / "libcuda.so.1"):
        if not needed.exists():
            sys.exit(f"{needed} is missing: build the tree first (cmake --build {build})")
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    sm = gpu_sm()
    target = sm or "8.6"
    print(f"GPU: {sm or 'none (the CPU part only, against the fake driver, for 8.6)'}")

    with tempfile.TemporaryDirectory(prefix="kcache-ptx-libraries-") as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "KCACHE_STATE_DIR": str(tmp / "state")}
        # The library: each bundled kernel's compute_80 PTX in a fatbin of its own.
        run([str(kcache), "warm", "--arch", "compute_80", "--store", str(tmp / "ptx-store"),
             str(ROOT / "kernels" / "manifest.yaml")], env=env)
        fatbins = {}
        for name in kernel_names():
            ptx = tmp / f"{name}.ptx"
            got = run([str(kcache), "get", "--store", str(tmp / "ptx-store"), "--device", "8.0",
                       "--kernel", name, "--no-compile", "-o", str(ptx)], env=env, check=False)
            if not ptx.exists():
                print(f"  {name}: no compute_80 PTX ({got.strip().splitlines()[-1]}), left out")
                continue
            fatbins[name] = tmp / f"{name}.fatbin"
            run([str(cuda_home / "bin/fatbinary"), "--64", f"--create={fatbins[name]}",
                 f"--image3=kind=ptx,sm=80,file={ptx}"])
        started = time.perf_counter()
        run([str(kcache), "warm", "--library", *map(str, fatbins.values()), "--arch", target,
             "--store", str(tmp / "baked")], env=env)
        warm_s = time.perf_counter() - started
        print(f"warm --library: {len(fatbins)} modules for {target} in {warm_s:.2f} s "
              f"({warm_s / len(fatbins) * 1e3:.0f} ms a module, nvJitLink on this machine)")

        socket = tmp / "kcache.sock"
        daemon = subprocess.Popen([str(kcached), "--store", str(tmp / "store"), "--baked",
                                   str(tmp / "baked"), "--no-toolkit", "--listen",
                                   f"unix://{socket}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            give_up = time.monotonic() + 30
            while not Path(f"{socket}.fast").exists():
                if daemon.poll() is not None or time.monotonic() > give_up:
                    sys.exit("kcached did not start")
                time.sleep(0.05)
            base = {**env, "CUDA_MODULE_LOADING": "EAGER"}
            served = [str(kcache), "run", "--server", f"unix://{socket}", "--shims",
                      str(tmp / "shims"), "--"]
            if sm is not None:
                gpu_part(program, kcache, fatbins, base, served, tmp, sm, args.runs)
            cpu_part(program, fake, fatbins, base, socket, build, args.runs)
        finally:
            daemon.terminate()
            daemon.wait(30)
    return 0


def module_id(ptx: bytes) -> str:
    """The PTX module id its SASS is stored under (docs/ptx-libraries.md, "Keys"), for a fatbin
    entry without options text, compiled with warm's options (-O3)."""
    def field(b: bytes) -> bytes:
        return len(b).to_bytes(8, "little") + b
    text = ptx.split(b"\0", 1)[0]
    return hashlib.sha256(b"kcache.ptx-sass\0" + (1).to_bytes(4, "little") + field(text) +
                          field(b"") + b"O" + field(b"-O3")).hexdigest()


def gpu_part(program: Path, kcache: Path, fatbins: dict, base: dict, served: list[str],
             tmp: Path, sm: str, runs: int) -> None:
    print(f"\n{'kernel':<20} {'jit':>11} {'warm-cache':>11} {'kcache':>11} {'sass':>11}"
          f"   kcache/warm-cache  jit/kcache  kcache/sass")
    for name, fatbin in fatbins.items():
        modes = {
            "jit": ({**base, "CUDA_CACHE_DISABLE": "1"}, None),
            "warm-cache": ({**base, "CUDA_CACHE_PATH": str(tmp / f"driver-cache-{name}")}, None),
            "kcache": ({**base, "CUDA_CACHE_DISABLE": "1"}, served),
        }
        sass = tmp / f"{name}.sm.cubin"
        run([str(kcache), "get", "--store", str(tmp / "baked"), "--device", sm, "--kernel",
             module_id((tmp / f"{name}.ptx").read_bytes()), "--no-compile", "-o", str(sass)],
            env=base, check=False)
        if sass.exists():
            modes["sass"] = ({**base, "CUDA_CACHE_DISABLE": "1"}, None)
        load_ms(program, fatbin, modes["warm-cache"][0])  # fills the driver's cache
        times = {mode: [load_ms(program, sass if mode == "sass" else fatbin, env, prefix)
                        for _ in range(runs)]
                 for mode, (env, prefix) in modes.items()}
        med = {mode: statistics.median(t) for mode, t in times.items()}
        floor = (f"{median_ms(times['sass'])}" if "sass" in med else f"{'-':>11}")
        over_sass = f"{med['kcache'] / med['sass']:11.2f}" if "sass" in med else f"{'-':>11}"
        print(f"{name:<20} {median_ms(times['jit'])} {median_ms(times['warm-cache'])} "
              f"{median_ms(times['kcache'])} {floor}   {med['kcache'] / med['warm-cache']:17.2f}"
              f"  {med['jit'] / med['kcache']:10.1f}  {over_sass}")


def cpu_part(program: Path, fake: Path, fatbins: dict, base: dict, socket: Path, build: Path,
             runs: int) -> None:
    # A real driver's first context takes 100 ms and more, before any module loads.
    env = {**base, "LD_LIBRARY_PATH": str(fake), "FAKE_CUDA_LOG": os.devnull,
           "FAKE_CUDA_CONTEXT_MS": "100"}
    stand_in = {**env, "LD_PRELOAD": str(build / "client/cli/cuda/libcuda.so.1"),
                "KCACHE_REAL_LIBCUDA": str(fake / "libcuda.so.1"),
                "KCACHE_SERVER": f"unix://{socket}"}
    modes = {
        "fake alone": {**env, "FAKE_CUDA_CC": "8.6"},
        "stand-in, served": {**stand_in, "FAKE_CUDA_CC": "8.6"},
        "stand-in, a miss": {**stand_in, "FAKE_CUDA_CC": "8.0"},
        # The miss without its PTX handed to `kcache cuda-build-ptx` (a process per module).
        "miss, not sent": {**stand_in, "FAKE_CUDA_CC": "8.0", "KCACHE_CUDA_BUILD": "0"},
    }
    # The process's first load (CUB_KERNEL's), then every other kernel's module in the same
    # process, as a worker loads its libraries.
    first = fatbins[CUB_KERNEL]
    others = [str(f) for name, f in fatbins.items() if name != CUB_KERNEL]
    times = {}
    for mode, e in modes.items():
        firsts, laters = [], []
        for _ in range(runs * 4):
            out = run([str(program), "data", str(first)], env={**e, "CUDA_LOAD_THEN":
                                                              ":".join(others)})
            firsts.append(float(re.search(r"load_ms ([0-9.]+)", out).group(1)))
            laters += [float(ms) for ms in re.findall(r"then_ms ([0-9.]+) result 0", out)]
        times[mode] = (firsts, laters)
    print(f"\nthe load path's own cost against the fake driver (no JIT), median of {runs * 4} "
          f"processes: a process's first load ({CUB_KERNEL}), then each of its "
          f"{len(others)} later loads (the other kernels' modules)")
    alone = [statistics.median(t) for t in times["fake alone"]]
    for mode, (firsts, laters) in times.items():
        print(f"  {mode:<18} first {median_ms(firsts)} ({statistics.median(firsts) - alone[0]:+.2f})"
              f"   later {median_ms(laters)} ({statistics.median(laters) - alone[1]:+.2f}) "
              f"ms against the fake alone")


if __name__ == "__main__":
    sys.exit(main())
