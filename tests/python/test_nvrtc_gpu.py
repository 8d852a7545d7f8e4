"""On a GPU: NVRTC compiles made inside a process by CuPy (a RawKernel), cuda.core (a Program
compiled and launched), torch (the jiterator:
a torch.special function on CUDA and torch.cuda.jiterator) and a DeepGEMM-style caller
(dlopen("libnvrtc.so.13") by soname, a CUBIN for the GPU's SM with a name expression, loaded and
launched through cuda.core) are served by kcache's NVRTC stand-in (docs/nvrtc-standin.md) in a
second pod, and compute there what they compute on the CPU. Each pod is a new process under
`kcache run --server` with the libraries' own caches empty. Every test skips without a GPU
(ctest: exit 125); tests/python/test_nvrtc_standin.py is the CPU half. Triton, which compiles
with its own ptxas, is checked to compute under `kcache run` (the driver stand-in in front of the
real driver) what it computes alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kcache

DEVICES = kcache.detect_devices()
pytestmark = pytest.mark.skipif(not DEVICES, reason="no GPU (kcache.detect_devices() is empty)")

FORWARDED = "kcache: nvrtc: nvrtcCompileProgram forwarded to "
SERVED = "kcache: nvrtc: nvrtcCompileProgram served by kcache: "

# One pod's work: compiles and launches with the library named by argv[1], checks the result
# against the CPU, prints {"ok": ...} as JSON.
POD = r'''
import ctypes, json, sys
what = sys.argv[1]


def scales(device, kernel, factor):
    """Launches kernel(data, n) over data = 0..999 (float32) on `device` and says whether it
    multiplied each by `factor`."""
    import cupy, numpy
    from cuda.core import LaunchConfig, launch
    n = 1000
    data = cupy.arange(n, dtype=cupy.float32)
    stream = device.create_stream()
    # Arguments as cuda.core takes them (tests/python/launch_args.py): a pointer as an int.
    launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), kernel, data.data.ptr,
           numpy.int32(n))
    stream.sync()
    return bool(cupy.allclose(data, factor * cupy.arange(n, dtype=cupy.float32)))


if what == "cupy":
    import cupy
    axpy = cupy.RawKernel(r"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}""", "axpy")
    n = 1000
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    axpy(((n + 255) // 256,), (256,), (cupy.float32(2.0), x, y, cupy.int32(n)))
    ok = bool(cupy.allclose(y, 2.0 * x + 1.0))
elif what == "jiterator":
    import torch
    x = torch.linspace(0.1, 20.0, 1000, dtype=torch.float64)
    ok = torch.allclose(torch.special.bessel_j0(x.cuda()).cpu(), torch.special.bessel_j0(x),
                        rtol=1e-6, atol=1e-9)
    fma_plus = torch.cuda.jiterator._create_jit_fn(
        "template <typename T> T fma_plus(T x, T y) { return x * y + T(1); }")
    a = torch.rand(1000, device="cuda")
    b = torch.rand(1000, device="cuda")
    ok = ok and torch.allclose(fma_plus(a, b).cpu(), (a * b + 1).cpu())
elif what == "deepgemm":
    from cuda.core import Device, ObjectCode
    device = Device(0)
    device.set_current()
    major, minor = device.compute_capability
    nvrtc = ctypes.CDLL("libnvrtc.so.13")  # by soname, as DeepGEMM's NVRTC mode loads it
    source = b"""template <typename T, int kScale>
__global__ void scale(T* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= T(kScale);
}"""
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"scale.cu", 0, None, None) == 0
    assert nvrtc.nvrtcAddNameExpression(prog, b"scale<float, 3>") == 0
    opts = [f"--gpu-architecture=sm_{major}{minor}".encode(), b"-std=c++17", b"-default-device"]
    assert nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) == 0
    size = ctypes.c_size_t()
    assert nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)) == 0
    cubin = ctypes.create_string_buffer(size.value)
    assert nvrtc.nvrtcGetCUBIN(prog, cubin) == 0
    lowered = ctypes.c_char_p()
    assert nvrtc.nvrtcGetLoweredName(prog, b"scale<float, 3>", ctypes.byref(lowered)) == 0
    kernel = ObjectCode.from_cubin(cubin.raw).get_kernel(lowered.value.decode())
    ok = scales(device, kernel, 3.0)
elif what == "cuda_core":
    from cuda.core import Device, Program, ProgramOptions
    device = Device(0)
    device.set_current()
    major, minor = device.compute_capability
    program = Program(r"""
extern "C" __global__ void twice(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= 2.0f;
}""", "c++", ProgramOptions(arch=f"sm_{major}{minor}"))
    kernel = program.compile("cubin").get_kernel("twice")
    ok = scales(device, kernel, 2.0)
elif what == "triton":
    import torch, triton, triton.language as tl

    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask),
                 mask=mask)

    @triton.jit
    def total(x, out, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(out, tl.sum(tl.load(x + offsets, mask=offsets < n, other=0.0), axis=0))

    n = 1000
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    add[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    summed = torch.empty(1, device="cuda")
    total[(1,)](x, summed, n, BLOCK=1024)
    ok = torch.allclose(out.cpu(), (x + y).cpu()) and torch.allclose(
        summed.cpu(), x.sum().cpu().reshape(1), rtol=1e-4)
print(json.dumps({"ok": bool(ok)}))
'''

ROUTED = {"KCACHE_STORE", "KCACHE_SERVER", "KCACHE_REAL_NVRTC", "KCACHE_REAL_NVRTC_12",
          "LD_PRELOAD"}


def pod(kcache_cli: str, address: str, what: str, tmp_path: Path, name: str
        ) -> subprocess.CompletedProcess:
    """A new pod: a new process under `kcache run --server`, its libraries' caches empty."""
    home = tmp_path / name
    env = {k: v for k, v in os.environ.items() if k not in ROUTED}
    env.update(KCACHE_LOG="1", KCACHE_STATE_DIR=str(home / "state"),
               CUPY_CACHE_DIR=str(home / "cupy"), PYTORCH_KERNEL_CACHE_PATH=str(home / "torch"),
               TRITON_CACHE_DIR=str(home / "triton"))
    return subprocess.run([kcache_cli, "run", "--server", address, "--shims",
                           str(tmp_path / "shims"), "--", sys.executable, "-c", POD, what],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("what", ["cupy", "jiterator", "deepgemm", "cuda_core"])
def test_second_pod_is_served_and_computes_the_same(what: str, kcache_cli: str, own_daemon,
                                                     tmp_path: Path) -> None:
    if what in ("cupy", "deepgemm", "cuda_core"):
        pytest.importorskip("cupy")
        pytest.importorskip("cuda.core")
    else:
        pytest.importorskip("torch")
    first = pod(kcache_cli, own_daemon.address, what, tmp_path, "first")
    second = pod(kcache_cli, own_daemon.address, what, tmp_path, "second")
    for run in (first, second):
        assert run.returncode == 0, run.stdout + run.stderr
        assert json.loads(run.stdout.strip().splitlines()[-1])["ok"], run.stdout + run.stderr
    assert first.stderr.count(FORWARDED) >= 1, first.stderr
    assert second.stderr.count(SERVED) == first.stderr.count(FORWARDED), second.stderr
    assert second.stderr.count(FORWARDED) == 0, second.stderr


def test_triton_under_kcache_run_computes_what_it_computes_alone(kcache_cli: str, own_daemon,
                                                                  tmp_path: Path) -> None:
    """Triton compiles with its own ptxas and loads through the driver: under `kcache run` (the
    driver stand-in in front of the real driver) a vector add and a reduction compute what the
    CPU does, in a first pod and a second, and nothing fails that passes without kcache."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k not in ROUTED}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "alone-triton")
    alone = subprocess.run([sys.executable, "-c", POD, "triton"], env=env, capture_output=True,
                           text=True, timeout=600)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    for name in ("first", "second"):
        run = pod(kcache_cli, own_daemon.address, "triton", tmp_path, name)
        assert run.returncode == 0, run.stdout + run.stderr
        assert json.loads(run.stdout.strip().splitlines()[-1])["ok"], run.stdout + run.stderr
