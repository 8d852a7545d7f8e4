#!/usr/bin/env python3
"""bench/python: the bundled kernels for one device from Python, against the same from C++ and
against the kernel caches Python workers have today, all measured in this run.

  scripts/venv-python bench/python_bench.py [--device 8.9] [--runs 7] [--build build]

1. Start-up, Python vs C++: a kcached over a store `kcache warm` filled; each run times a worker's
   start (read the manifest, connect, one batch for every kernel that runs on the device) in this
   process through the `kcache` package, and in C++ as `kcache-example-worker --json` reports it
   (its own timer: process start-up excluded on both sides).
2. Peers, the same kernels: a warm hit in cuda.core's persistent program cache
   (cuda.core.utils.FileStreamProgramCache + make_program_cache_key) and in CuPy's on-disk kernel
   cache (cupy.cuda.compiler, arch given: no GPU needed), against kcache hits from Python; and
   each one's cold miss (an empty cache: NVRTC in this process) against kcached compiling them
   (an empty store) and libkcache's local compile. Every "hit" ends with the bytes in hand: the
   driver's module load, which none of them can do without a GPU, is left out of all of them
   (CuPy's loader is replaced by one that keeps the bytes).
Ratios are against the baseline of the same table, measured in this run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="8.9")
    p.add_argument("--runs", type=int, default=7, help="timed passes per warm measurement")
    p.add_argument("--build", default=str(REPO / "build"), help="the CMake build tree")
    p.add_argument("--manifest", default=str(REPO / "kernels" / "manifest.yaml"))
    p.add_argument("--toolkit", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    p.add_argument("--skip-cold", action="store_true", help="leave out the cold compiles")
    # internal: one fresh-process warm start (see fresh_process_start)
    p.add_argument("--child", choices=["kcache", "kcache-worker", "import", "cuda.core", "cupy"],
                   help=argparse.SUPPRESS)
    p.add_argument("--child-cache", help=argparse.SUPPRESS)
    p.add_argument("--child-address", help=argparse.SUPPRESS)
    return p.parse_args()


ARGS = parse_args()
BUILD = Path(ARGS.build)
os.environ.setdefault("KCACHE_LIBRARY", str(BUILD / "client" / "lib" / "libkcache.so"))
sys.path.insert(0, str(REPO / "client" / "python" / "src"))
_IMPORT_START = time.perf_counter()
import kcache  # noqa: E402

kcache.library_version()  # loads libkcache.so
_IMPORT_SECONDS = time.perf_counter() - _IMPORT_START
from kcached_process import Daemon  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def median_of(runs: int, fn: Callable[[], float]) -> Tuple[float, float]:
    """(first, median of the rest) of `runs` + 1 timed calls."""
    first = fn()
    rest = [fn() for _ in range(runs)]
    return first, statistics.median(rest)


def table(title: str, rows: List[Tuple[str, float]], baseline: str) -> str:
    base = dict(rows)[baseline]
    lines = [f"### {title}", "", "| what | wall time | / baseline |", "|---|---|---|"]
    for name, seconds in rows:
        mark = "**baseline**" if name == baseline else f"{seconds / base:.2f}x"
        lines.append(f"| {name} | {ms(seconds)} | {mark} |")
    return "\n".join(lines) + "\n"


# -- kcache ------------------------------------------------------------------------------------
def python_start(address: str, manifest: str, device: kcache.Device) -> Tuple[float, List[Any]]:
    """A worker's start in Python: manifest, client, one batch. Seconds and the results."""
    start = time.perf_counter()
    kcache.detect_devices()  # as kcache-example-worker does, even with --device
    sources = [s for s in kcache.load_manifest(manifest) if runs_on(s, device)]
    with kcache.Client(address, local_compile_fallback=False) as client:
        results = client.resolve_many(sources, device)
    elapsed = time.perf_counter() - start
    failed = [r for r in results if isinstance(r, kcache.Error)]
    if failed:
        raise SystemExit(f"python start: {failed[0]}")
    return elapsed, results


def cpp_start(worker: str, address: str, manifest: str, device: str) -> float:
    run = subprocess.run([worker, "--manifest", manifest, "--device", device, "--driver", "13000",
                          "--server", address, "--json"], capture_output=True, text=True,
                         timeout=300)
    if run.returncode != 0:
        raise SystemExit(f"kcache-example-worker: {run.stdout}{run.stderr}")
    return json.loads(run.stdout)["total_micros"] / 1e6


def runs_on(s: kcache.KernelSource, device: kcache.Device) -> bool:
    return (not s.min_arch or device.arch >= s.min_arch) and (not s.max_arch or device.arch <= s.max_arch)


# -- peers -------------------------------------------------------------------------------------
class CudaCorePeer:
    """cuda.core's persistent program cache: key from the inputs, then the file."""

    name = "cuda.core FileStreamProgramCache"

    def __init__(self, directory: Path, toolkit: str, kernels_dir: Path) -> None:
        from cuda.core import Program, ProgramOptions
        from cuda.core.utils import FileStreamProgramCache, make_program_cache_key

        self.Program, self.ProgramOptions = Program, ProgramOptions
        self.key_of = make_program_cache_key
        self.cache = FileStreamProgramCache(str(directory))
        self.include = [str(kernels_dir), f"{toolkit}/include", f"{toolkit}/include/cccl"]

    def _options(self, s: kcache.KernelSource, arch: int) -> Any:
        std = next((o.split("=", 1)[1] for o in s.options if o.startswith("-std=")), None)
        names = [o[2:] for o in s.options if o.startswith("-D")]
        macros: List[Any] = [tuple(m.split("=", 1)) if "=" in m else m for m in names]
        return self.ProgramOptions(arch=f"sm_{arch}", std=std, include_path=self.include,
                                   define_macro=macros or None)

    def _key(self, s: kcache.KernelSource, arch: int) -> bytes:
        headers = hashlib.sha256(json.dumps(sorted(s.headers.items())).encode()).digest()
        return self.key_of(code=s.source, code_type="c++", options=self._options(s, arch),
                           target_type="cubin", name_expressions=tuple(s.name_expressions),
                           extra_digest=headers)

    def compile(self, s: kcache.KernelSource, arch: int) -> int:
        program = self.Program(s.source, "c++", options=self._options(s, arch))
        code = program.compile("cubin", name_expressions=tuple(s.name_expressions))
        self.cache[self._key(s, arch)] = code
        return len(code.code)

    def hit(self, s: kcache.KernelSource, arch: int) -> int:
        data = self.cache.get(self._key(s, arch))
        if data is None:
            raise RuntimeError(f"cuda.core cache: no entry for {s.name}")
        return len(data if isinstance(data, (bytes, bytearray)) else data.code)


class CupyPeer:
    """CuPy's on-disk kernel cache (cupy.cuda.compiler, the path RawModule/RawKernel take), with
    the arch given, and its module loader replaced by one that keeps the bytes."""

    name = "CuPy kernel cache (on disk)"

    def __init__(self, directory: Path, toolkit: str, kernels_dir: Path) -> None:
        os.environ["CUPY_CACHE_DIR"] = str(directory)
        os.environ.setdefault("CUDA_PATH", toolkit)
        import cupy.cuda.compiler as compiler

        class BytesModule:  # stands for cupy.cuda.function.Module: no driver needed
            def load(self, cubin: bytes) -> None:
                self.cubin = cubin

            def _set_mapping(self, mapping: Any) -> None:
                self.mapping = mapping

        compiler.function = types.SimpleNamespace(Module=BytesModule,
                                                  LinkState=compiler.function.LinkState)

        # CuPy memoizes this per device (cudaGetDevice: fails without a GPU); the same choice
        # without the memo: SASS for an arch NVRTC supports, as CuPy makes it on a GPU.
        def arch_option(arch: str) -> Tuple[str, str]:
            if not compiler._use_ptx and int(arch) <= int(compiler._get_max_compute_capability()):
                return f"-arch=sm_{arch}", "cubin"
            return f"-arch=compute_{arch}", "ptx"

        compiler._get_arch_for_options_for_nvrtc = arch_option
        self.compiler = compiler
        self.include = [f"-I{kernels_dir}", f"-I{toolkit}/include", f"-I{toolkit}/include/cccl"]

    def _get(self, s: kcache.KernelSource, arch: int) -> int:
        module = self.compiler._compile_with_cache_cuda(
            s.source, tuple(s.options) + tuple(self.include), str(arch),
            name_expressions=list(s.name_expressions) or None)
        return len(module.cubin)

    def compile(self, s: kcache.KernelSource, arch: int) -> int:
        return self._get(s, arch)  # an empty cache directory: NVRTC, then the file is written

    def hit(self, s: kcache.KernelSource, arch: int) -> int:
        return self._get(s, arch)


def time_pass(fn: Callable[[kcache.KernelSource, int], int], sources: List[kcache.KernelSource],
              arch: int) -> float:
    start = time.perf_counter()
    for s in sources:
        fn(s, arch)
    return time.perf_counter() - start


PEERS: Dict[str, Any] = {"cuda.core": CudaCorePeer, "cupy": CupyPeer}


def child() -> int:
    """One warm start in this fresh process: the sources are read first (untimed, the same for
    everyone); timed: importing the peer's library, making its cache or client, and getting every
    kernel's bytes. Prints the seconds."""
    device = kcache.Device.parse(ARGS.device, 13000)
    if ARGS.child == "import":
        print(_IMPORT_SECONDS)
        return 0
    if ARGS.child == "kcache-worker":  # what kcache-example-worker's total_micros covers
        print(python_start(ARGS.child_address, ARGS.manifest, device)[0])
        return 0
    sources = [s for s in kcache.load_manifest(ARGS.manifest) if runs_on(s, device)]
    kernels_dir = Path(ARGS.manifest).resolve().parent
    start = time.perf_counter()
    if ARGS.child == "kcache":
        with kcache.Client(ARGS.child_address, local_compile_fallback=False) as client:
            results = client.resolve_many(sources, device)
        assert all(isinstance(r, kcache.Kernel) for r in results), results
        start -= _IMPORT_SECONDS  # the peers' rows include importing their library too
    else:
        peer = PEERS[ARGS.child](Path(ARGS.child_cache), ARGS.toolkit, kernels_dir)
        for s in sources:
            peer.hit(s, device.arch)
    print(time.perf_counter() - start)
    return 0


def fresh_process_start(which: str, cache: Optional[Path], address: Optional[str]) -> float:
    command = [sys.executable, __file__, "--child", which, "--device", ARGS.device,
               "--manifest", ARGS.manifest, "--toolkit", ARGS.toolkit, "--build", str(BUILD)]
    if cache is not None:
        command += ["--child-cache", str(cache)]
    if address is not None:
        command += ["--child-address", address]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise SystemExit(f"{which} child: {run.stdout}{run.stderr}")
    return float(run.stdout.strip().splitlines()[-1])


def main() -> int:
    device = kcache.Device.parse(ARGS.device, 13000)
    cli = str(BUILD / "client" / "cli" / "kcache")
    kcached = str(BUILD / "daemon" / "kcached")
    worker = str(BUILD / "examples" / "worker" / "kcache-example-worker")
    all_sources = kcache.load_manifest(ARGS.manifest)
    sources = [s for s in all_sources if runs_on(s, device)]
    kernels_dir = Path(ARGS.manifest).resolve().parent
    work = Path(tempfile.mkdtemp(prefix="kcache-pybench-"))
    out: List[str] = []
    print(f"bench/python: device {device}, {len(sources)} of {len(all_sources)} manifest kernels "
          f"run on it, {os.cpu_count()} cores, {ARGS.runs} timed runs each", flush=True)
    try:
        store = work / "store"
        start = time.perf_counter()
        warm = subprocess.run([cli, "warm", ARGS.manifest, "--store", str(store), "--arch",
                               ARGS.device], capture_output=True, text=True)
        if warm.returncode != 0:
            raise SystemExit(warm.stdout + warm.stderr)
        print(f"  kcache warm --store for {ARGS.device}: {ms(time.perf_counter() - start)}",
              flush=True)
        (work / "d").mkdir()
        daemon = Daemon(kcached, store, work / "d")
        daemon.start()
        try:
            # 1. Python vs C++: a new process each (its own timer, from its first line of work:
            # process start and dynamic linking are left out of both), alternating, the same
            # daemon; the very first answers are store hits, then memory.
            cpp_first = cpp_start(worker, daemon.address, ARGS.manifest, ARGS.device)
            py_first = fresh_process_start("kcache-worker", None, daemon.address)
            py, cpp, py_in = [], [], []
            for _ in range(ARGS.runs):
                cpp.append(cpp_start(worker, daemon.address, ARGS.manifest, ARGS.device))
                py.append(fresh_process_start("kcache-worker", None, daemon.address))
                py_in.append(python_start(daemon.address, ARGS.manifest, device)[0])
            imports = statistics.median(
                [fresh_process_start("import", None, None) for _ in range(ARGS.runs)])
            out.append(table(
                f"Worker start-up, {len(sources)} kernels for {device}: Python vs C++ "
                f"(median of {ARGS.runs}; detect devices, read the manifest, connect, one batch)",
                [("C++: kcache-example-worker --json total, new process", statistics.median(cpp)),
                 ("Python: the same steps with the kcache package, new process",
                  statistics.median(py)),
                 ("Python: the same steps again in a process that already made a client",
                  statistics.median(py_in)),
                 ("Python: `import kcache` and loading libkcache.so, new process", imports),
                 ("C++, first start after the daemon started (store hits)", cpp_first),
                 ("Python, first start after that (memory hits), new process", py_first)],
                "C++: kcache-example-worker --json total, new process"))
            print(out[-1], flush=True)

            # 2. Warm hits: kcache from Python against the peers' caches (filled cold below).
            with kcache.Client(daemon.address, local_compile_fallback=False) as client:
                def kcache_batch() -> float:
                    start = time.perf_counter()
                    results = client.resolve_many(sources, device)
                    assert all(isinstance(r, kcache.Kernel) for r in results)
                    return time.perf_counter() - start

                def kcache_each() -> float:
                    start = time.perf_counter()
                    for s in sources:
                        client.resolve(s, device)
                    return time.perf_counter() - start

                _, kc_batch = median_of(ARGS.runs, kcache_batch)
                _, kc_each = median_of(ARGS.runs, kcache_each)

            peers = []
            cold_rows: List[Tuple[str, float]] = []
            for key, cls in PEERS.items():
                try:
                    peer = cls(work / key, ARGS.toolkit, kernels_dir)
                except Exception as e:  # noqa: BLE001  (a peer that cannot run is reported)
                    print(f"  {cls.name}: cannot run here: {e!r}", flush=True)
                    continue
                ok = []
                start = time.perf_counter()
                for s in sources:
                    try:
                        peer.compile(s, device.arch)
                        ok.append(s)
                    except Exception as e:  # noqa: BLE001
                        print(f"  {peer.name}: {s.name}: compile failed: {str(e)[:300]}",
                              flush=True)
                cold = time.perf_counter() - start
                print(f"  {peer.name}: cold, {len(ok)} kernels compiled in {ms(cold)}", flush=True)
                if len(ok) == len(sources):
                    cold_rows.append((f"{peer.name}: empty cache, NVRTC in process", cold))
                peers.append((key, peer, ok))

            warm_rows = [("kcache from Python: one resolve_many (daemon memory)", kc_batch),
                         ("kcache from Python: a resolve per kernel (daemon memory)", kc_each)]
            for key, peer, ok in peers:
                _, med = median_of(ARGS.runs, lambda: time_pass(peer.hit, ok, device.arch))
                label = "" if len(ok) == len(sources) else f" ({len(ok)} kernels)"
                warm_rows.append((f"{peer.name}: warm hit{label}", med))
            out.append(table(f"Warm hits in a running process, {len(sources)} kernels for "
                             f"{device} (median of {ARGS.runs}; bytes in hand, no module load)",
                             warm_rows, "kcache from Python: one resolve_many (daemon memory)"))
            print(out[-1], flush=True)

            fresh_rows = [("kcache: import, Client, one resolve_many (daemon memory)", statistics.median(
                [fresh_process_start("kcache", None, daemon.address) for _ in range(ARGS.runs)]))]
            for key, peer, ok in peers:
                if len(ok) == len(sources):
                    fresh_rows.append((f"{peer.name}: import, open the cache, every hit",
                                       statistics.median([fresh_process_start(key, work / key, None)
                                                          for _ in range(ARGS.runs)])))
            out.append(table(f"Warm start of a new worker process, {len(sources)} kernels for "
                             f"{device} (median of {ARGS.runs}; bytes in hand, no module load)",
                             fresh_rows, "kcache: import, Client, one resolve_many (daemon memory)"))
            print(out[-1], flush=True)
        finally:
            daemon.stop()

        if not ARGS.skip_cold:
            (work / "c").mkdir()
            cold_daemon = Daemon(kcached, work / "empty-store", work / "c")
            cold_daemon.start()
            try:
                with kcache.Client(cold_daemon.address, deadline=600.0,
                                   local_compile_fallback=False) as client:
                    start = time.perf_counter()
                    results = client.resolve_many(sources, device)
                    kc_cold = time.perf_counter() - start
                    assert all(isinstance(r, kcache.Kernel) and r.served_from == "daemon:compile"
                               for r in results), results
            finally:
                cold_daemon.stop()
            absent = f"unix://{work}/absent.sock"
            with kcache.Client(absent, breaker_failures=1, breaker_cooldown=3600.0,
                               toolkit_root=ARGS.toolkit) as local:
                start = time.perf_counter()
                results = local.resolve_many(sources, device)
                local_cold = time.perf_counter() - start
                assert all(isinstance(r, kcache.Kernel) and r.served_from == "local_compile"
                           for r in results), results
            rows = [("kcached compiles them (empty store, one resolve_many)", kc_cold),
                    ("libkcache local compile (NVRTC in process, toolkit load included)",
                     local_cold)] + cold_rows
            out.append(table(f"Cold misses, {len(sources)} kernels for {device}", rows,
                             "kcached compiles them (empty store, one resolve_many)"))
            print(out[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(child() if ARGS.child else main())
