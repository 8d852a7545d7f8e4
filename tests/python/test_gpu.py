"""On a GPU: a kernel resolved by kcache for the GPU's own SM loads and runs through cuda.core
and through CuPy and computes y = a * x + y; kcache.load refuses a cubin for another SM with the
message; on a node of two or more GPUs each runs its own SM's kernel. Every test skips without a
GPU (ctest: exit 125)."""

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


def _other_sm(device: kcache.Device) -> kcache.Device:
    """A device whose SASS does not run on `device`'s SM: another major."""
    return (kcache.Device(8, 6, device.driver_version) if device.sm_major == 7
            else kcache.Device(7, 5, device.driver_version))


def test_load_refuses_a_cubin_for_another_sm_on_the_gpu(client: kcache.Client,
                                                        manifest_kernels: dict) -> None:
    gpu = kcache.detect_gpus()[0]
    other = _other_sm(gpu.device)
    wrong = client.resolve(manifest_kernels["axpy"], other)
    assert wrong.target == f"sm_{other.arch}"
    with pytest.raises(kcache.FailedPrecondition) as refused:
        kcache.load(wrong, gpu)
    assert (f"axpy is sm_{other.arch} SASS; GPU {gpu.ordinal} is {gpu.name} "
            f"(sm_{gpu.device.arch}): resolve it for {gpu.device}") in refused.value.reason


def test_every_gpu_of_the_node_runs_its_own_kernel(client: kcache.Client,
                                                   manifest_kernels: dict) -> None:
    cuda_core = pytest.importorskip("cuda.core")
    cupy = pytest.importorskip("cupy")
    gpus = kcache.detect_gpus()
    if len(gpus) < 2:
        pytest.skip("one GPU: the node test needs two or more")
    node = kcache.resolve_for_gpus(client, [manifest_kernels["axpy"]], gpus)
    for g, gpu in enumerate(gpus):
        k = node.for_gpu(g)[0]
        assert isinstance(k, kcache.Kernel) and k.target == f"sm_{gpu.device.arch}", k
        kernel = kcache.load(k, gpu)["axpy"]  # checked, loaded on this GPU, entry points looked up
        device = cuda_core.Device(gpu.ordinal)
        device.set_current()
        with cupy.cuda.Device(gpu.ordinal):
            n = 1000
            x = cupy.arange(n, dtype=cupy.float32)
            y = cupy.ones(n, dtype=cupy.float32)
            cupy.cuda.Device(gpu.ordinal).synchronize()
            stream = device.create_stream()
            config = cuda_core.LaunchConfig(grid=(n + 255) // 256, block=256)
            cuda_core.launch(stream, config, kernel,
                             *axpy_launch_args(x.data.ptr, y.data.ptr, n))
            stream.sync()
            assert bool(cupy.allclose(y, 2.0 * x + 1.0)), f"GPU {g}"
