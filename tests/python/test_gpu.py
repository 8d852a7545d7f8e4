"""On a GPU: a kernel resolved by kcache for the GPU's own SM loads and runs through cuda.core
and through CuPy and computes y = a * x + y. Every test skips without a GPU (ctest: exit 125)."""

from __future__ import annotations

from pathlib import Path

import pytest

import kcache
from launch_args import axpy_launch_args

DEVICES = kcache.detect_devices()
pytestmark = pytest.mark.skipif(not DEVICES, reason="no GPU (kcache.detect_devices() is empty)")


@pytest.fixture()
def axpy(client: kcache.Client, manifest_kernels: dict) -> kcache.Kernel:
    k = client.resolve(manifest_kernels["axpy"], DEVICES[0])
    assert k.kind in ("cubin", "ptx")
    return k


def test_cuda_core_loads_and_launches(axpy: kcache.Kernel) -> None:
    cuda_core = pytest.importorskip("cuda.core")
    cupy = pytest.importorskip("cupy")  # device memory (CuPy and cuda.core share the context)
    device = cuda_core.Device(0)
    device.set_current()
    code = (cuda_core.ObjectCode.from_cubin(bytes(axpy)) if axpy.kind == "cubin"
            else cuda_core.ObjectCode.from_ptx(bytes(axpy)))
    kernel = code.get_kernel("axpy")
    n = 1000
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    cupy.cuda.Device(0).synchronize()
    stream = device.create_stream()
    config = cuda_core.LaunchConfig(grid=(n + 255) // 256, block=256)
    cuda_core.launch(stream, config, kernel, *axpy_launch_args(x.data.ptr, y.data.ptr, n))
    stream.sync()
    assert bool(cupy.allclose(y, 2.0 * x + 1.0))


def test_cupy_loads_and_launches(axpy: kcache.Kernel, tmp_path: Path) -> None:
    cupy = pytest.importorskip("cupy")
    path = tmp_path / ("axpy.cubin" if axpy.kind == "cubin" else "axpy.ptx")
    path.write_bytes(axpy.data)
    function = cupy.RawModule(path=str(path)).get_function("axpy")
    n = 1000
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    function(((n + 255) // 256,), (256,), axpy_launch_args(x, y, n))
    assert cupy.allclose(y, 2.0 * x + 1.0)
