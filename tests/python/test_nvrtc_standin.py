"""kcache's libnvrtc.so.13 stand-in (docs/nvrtc-standin.md) in Python processes under
`kcache run`: cuda-python's bindings and cuda.core compile through it (cuda.pathfinder finds a
loaded libnvrtc.so.13 before it looks in the wheel), byte for byte as they compile without it:
the stand-in forwards to the NVRTC the process would load without kcache (this environment's
nvidia-cuda-nvrtc wheel, 13.2 beside the toolkit's 13.0) unless KCACHE_REAL_NVRTC names
another (the toolkit's, say); under `kcache run
--server` a second process is served both callers' compiles, byte for byte, and CuPy's, whose
programs are named in a new temporary directory each time; torch, whose
libtorch_cuda.so links NVRTC's versioned symbols, imports under it. The C programs' side is
tests/integration/nvrtc_standin_test.cc."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

TOOLKIT_NVRTC = "/usr/local/cuda/lib64/libnvrtc.so.13"
FORWARDED = "kcache: nvrtc: nvrtcCompileProgram forwarded to "
SERVED = "kcache: nvrtc: nvrtcCompileProgram served by kcache: "

# Compiles one kernel with cuda.bindings' nvrtc (PTX for compute_89) and cuda.core's Program
# (CUBIN for sm_89; its PTX output asks the driver whether it could load it, which needs a
# GPU), and prints what came out and which NVRTC libraries the process mapped, as JSON.
CALLER = r'''
import hashlib, json
from cuda.bindings import nvrtc
from cuda.core import Program, ProgramOptions

SOURCE = """template <typename T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}
"""

def check(result):
    err = result[0]
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, nvrtc.nvrtcGetErrorString(err)
    return result[1:]

major, minor = check(nvrtc.nvrtcVersion())
(prog,) = check(nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"scale.cu", 0, [], []))
check(nvrtc.nvrtcAddNameExpression(prog, b"scale<float>"))
options = [b"--gpu-architecture=compute_89"]
check(nvrtc.nvrtcCompileProgram(prog, len(options), options))
(size,) = check(nvrtc.nvrtcGetPTXSize(prog))
ptx = b" " * size
check(nvrtc.nvrtcGetPTX(prog, ptx))
(lowered,) = check(nvrtc.nvrtcGetLoweredName(prog, b"scale<float>"))
check(nvrtc.nvrtcDestroyProgram(prog))

code = Program(SOURCE, "c++", ProgramOptions(arch="sm_89")).compile(
    "cubin", name_expressions=("scale<float>",))
core_lowered = code.symbol_mapping.get("scale<float>")
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnvrtc.so" in line})
print(json.dumps({
    "version": [major, minor],
    "ptx": hashlib.sha256(ptx).hexdigest(),
    "lowered": lowered.decode(),
    "cubin": hashlib.sha256(bytes(code.code)).hexdigest(),
    "core_lowered": core_lowered.decode() if isinstance(core_lowered, bytes) else core_lowered,
    "maps": maps,
}))
'''

# Every variable `kcache run` sets or reads (tests/testutil/kcache_run.h), left out of the
# environment each run starts from.
ROUTED = {"KCACHE_STORE", "KCACHE_SERVER", "KCACHE_REAL_CUDA_HOME", "CUDA_HOME", "CUDA_PATH",
          "CUDACXX", "PYTORCH_NVCC", "FLASHINFER_NVCC", "DG_JIT_NVCC_COMPILER", "CC", "CXX",
          "CMAKE_CUDA_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER",
          "CMAKE_C_COMPILER_LAUNCHER", "FLASHINFER_NVCC_LAUNCHER", "FLASHINFER_CXX_LAUNCHER",
          "TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST", "KCACHE_BASEDIR",
          "KCACHE_REAL_NVRTC", "KCACHE_REAL_NVRTC_12", "LD_PRELOAD"}


@pytest.fixture(scope="module")
def stand_in(kcache_cli: str) -> Path:
    path = Path(kcache_cli).parent / "nvrtc" / "libnvrtc.so.13"
    if not path.exists():
        pytest.skip(f"no NVRTC stand-in at {path}")
    if not os.path.exists(TOOLKIT_NVRTC):
        pytest.skip(f"no NVRTC at {TOOLKIT_NVRTC}")
    pytest.importorskip("cuda.bindings")
    pytest.importorskip("cuda.core")
    return path


def wheel_nvrtc() -> Optional[str]:
    """The nvidia-cuda-nvrtc wheel's libnvrtc.so.13, which cuda-python loads on its own."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root) / "cu13" / "lib" / "libnvrtc.so.13"
        if candidate.exists():
            return str(candidate)
    return None


def clean_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ROUTED}
    env["CUDA_HOME"] = "/usr/local/cuda"
    env.update(extra)
    return env


def run_caller(args: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args + [sys.executable, "-c", CALLER], env=env, capture_output=True,
                          text=True, timeout=300)


def under_kcache(kcache_cli: str, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    env = clean_env(KCACHE_LOG="1", KCACHE_STATE_DIR=str(tmp_path / "state"), **extra)
    return run_caller([kcache_cli, "run", "--store", str(tmp_path / "store"), "--shims",
                       str(tmp_path / "shims"), "--"], env)


def result(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def exports(library: str) -> Set[str]:
    nm = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                        check=True)
    return {f[2] for f in (line.split() for line in nm.stdout.splitlines())
            if len(f) == 3 and f[1] == "T"}


def test_stand_in_exports_what_the_wheels_nvrtc_exports(stand_in: Path) -> None:
    wheel = wheel_nvrtc()
    if wheel is None:
        pytest.skip("no nvidia-cuda-nvrtc 13 wheel in this environment")
    missing = exports(wheel) - exports(str(stand_in))
    assert not missing, f"add to client/nvrtc/nvrtc_entries.h: {sorted(missing)}"


def test_cuda_python_gets_the_nvrtc_it_loads_without_kcache(
        stand_in: Path, kcache_cli: str, tmp_path: Path) -> None:
    run = under_kcache(kcache_cli, tmp_path)
    through = result(run)
    direct = result(run_caller([], clean_env()))
    assert str(stand_in.resolve()) in [str(Path(m).resolve()) for m in through["maps"]], through
    # What cuda.pathfinder loads without kcache: the wheel's NVRTC where this environment has
    # one (13.2 beside the toolkit's 13.0), which the stand-in forwards to.
    wheel = wheel_nvrtc()
    real = wheel if wheel is not None else direct["maps"][0]
    assert any(m == real for m in direct["maps"]), direct
    assert run.stderr.count(FORWARDED + real + ": NVRTC_SUCCESS") == 2, run.stderr
    assert through["version"] == direct["version"], (through, direct)
    for key in ("ptx", "lowered", "cubin", "core_lowered"):
        assert through[key] == direct[key], key
    assert through["lowered"].startswith("_Z5scaleIf"), through


def test_kcache_real_nvrtc_names_another_nvrtc(stand_in: Path, kcache_cli: str,
                                               tmp_path: Path) -> None:
    run = under_kcache(kcache_cli, tmp_path, KCACHE_REAL_NVRTC=TOOLKIT_NVRTC)
    through = result(run)
    assert through["version"] == [13, 0], through
    assert all(not m.endswith("cu13/lib/libnvrtc.so.13") for m in through["maps"]), through
    assert run.stderr.count(FORWARDED + TOOLKIT_NVRTC + ": NVRTC_SUCCESS") == 2, run.stderr
    # The same real NVRTC without the stand-in (preloaded, so cuda.pathfinder takes it).
    direct = result(run_caller([], clean_env(LD_PRELOAD=TOOLKIT_NVRTC)))
    assert direct["version"] == [13, 0]
    for key in ("ptx", "lowered", "cubin", "core_lowered"):
        assert through[key] == direct[key], key


def test_second_process_is_served_both_callers_compiles(stand_in: Path, kcache_cli: str,
                                                        own_daemon, tmp_path: Path) -> None:
    if not (stand_in.parent / "libkcache-nvrtc.so").exists():
        pytest.skip("no libkcache-nvrtc.so beside the stand-in (a sanitizer build)")
    runs = []
    for _ in range(2):
        env = clean_env(KCACHE_LOG="1", KCACHE_STATE_DIR=str(tmp_path / "state"))
        runs.append(run_caller([kcache_cli, "run", "--server", own_daemon.address, "--shims",
                                str(tmp_path / "shims"), "--"], env))
    first, second = (result(run) for run in runs)
    assert runs[0].stderr.count(FORWARDED) == 2, runs[0].stderr
    assert runs[1].stderr.count(SERVED + "NVRTC_SUCCESS") == 2, runs[1].stderr
    assert runs[1].stderr.count(FORWARDED) == 0, runs[1].stderr
    direct = result(run_caller([], clean_env()))
    for key in ("ptx", "lowered", "cubin", "core_lowered"):
        assert first[key] == direct[key], key
        assert second[key] == direct[key], key


# CuPy's RawKernel compile (compiler._compile_with_cache_cuda): NVRTC compiles an empty program
# (CuPy's check of NVRTC's version) and the kernel, named <hash>.cubin.cu in a new temporary
# directory each time, and CuPy saves the CUBIN and lowered names in its own cache
# ($CUPY_CACHE_DIR). Loading the module then needs a GPU; so does CuPy's choice of -arch, which
# is answered here as it would be on an sm_89. Prints the saved files' digests as JSON.
CUPY_CALLER = r'''
import hashlib, json, os
from cupy.cuda import compiler
compiler._get_arch_for_options_for_nvrtc = lambda arch=None: (f"-arch=sm_{arch}", "cubin")
SOURCE = """template <typename T> __global__ void scale(T* x, T f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
}
extern "C" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
"""
try:
    compiler._compile_with_cache_cuda(SOURCE, (), "89", name_expressions=["scale<float>"])
except Exception:  # compiled and saved; the module's load needs a GPU
    pass
cache = os.environ["CUPY_CACHE_DIR"]
print(json.dumps({f: hashlib.sha256(open(os.path.join(cache, f), "rb").read()).hexdigest()
                  for f in sorted(os.listdir(cache))}))
'''


def test_cupys_compile_is_served_in_a_new_process(stand_in: Path, kcache_cli: str, own_daemon,
                                                   tmp_path: Path) -> None:
    if not (stand_in.parent / "libkcache-nvrtc.so").exists():
        pytest.skip("no libkcache-nvrtc.so beside the stand-in (a sanitizer build)")
    pytest.importorskip("cupy")

    def pod(name: str, kcache: bool) -> subprocess.CompletedProcess:
        env = clean_env(KCACHE_LOG="1", KCACHE_STATE_DIR=str(tmp_path / "state"),
                        CUPY_CACHE_DIR=str(tmp_path / name))  # CuPy's cache empty: a new pod
        args = [kcache_cli, "run", "--server", own_daemon.address, "--shims",
                str(tmp_path / "shims"), "--"] if kcache else []
        return subprocess.run(args + [sys.executable, "-c", CUPY_CALLER], env=env,
                              capture_output=True, text=True, timeout=300)

    direct, first, second = pod("direct", False), pod("first", True), pod("second", True)
    saved = [result(run) for run in (direct, first, second)]
    assert len(saved[0]) == 1, saved[0]
    assert saved[1] == saved[0] and saved[2] == saved[0], saved
    assert first.stderr.count(FORWARDED) == 2, first.stderr
    assert first.stderr.count("for its program's name in any directory") == 1, first.stderr
    assert second.stderr.count(SERVED + "NVRTC_SUCCESS") == 2, second.stderr
    assert second.stderr.count(FORWARDED) == 0, second.stderr


def test_torch_imports_under_it(stand_in: Path, kcache_cli: str, tmp_path: Path) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    script = ("import json, torch\n"
              "print(json.dumps(sorted({l.split()[-1] for l in open('/proc/self/maps')"
              " if 'libnvrtc.so.13' in l})))\n")
    env = clean_env(KCACHE_STATE_DIR=str(tmp_path / "state"))
    run = subprocess.run([kcache_cli, "run", "--store", str(tmp_path / "store"), "--shims",
                          str(tmp_path / "shims"), "--", sys.executable, "-c", script], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    maps = json.loads(run.stdout.strip().splitlines()[-1])
    # libtorch_cuda.so's NVRTC 13 is the stand-in: the wheel's is not even loaded.
    assert [str(Path(m).resolve()) for m in maps] == [str(stand_in.resolve())], maps
