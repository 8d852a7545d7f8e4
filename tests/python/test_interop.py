"""A cubin resolved by kcache, handed to cuda.core and CuPy as far as each goes on this machine.

Without a GPU neither can load a module: the tests then check that each accepts kcache's bytes
and that loading fails for the one reason there is, the missing
driver, with the exact error each gives. test_gpu.py loads and launches on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kcache

DEVICE = kcache.Device(8, 9, 13000)
HAVE_GPU = bool(kcache.detect_devices())


def error_chain(e: BaseException) -> str:
    """Every exception of a chain (cause, context), as "Type: message" lines."""
    lines = []
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        lines.append(f"{type(e).__module__}.{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return "\n".join(lines)


def test_cuda_core_takes_the_cubin(client: kcache.Client, manifest_kernels: dict) -> None:
    cuda_core = pytest.importorskip("cuda.core")
    k = client.resolve(manifest_kernels["scale"], DEVICE)
    # cuda.core 1.2 keeps whatever it is given but its loader takes only bytes (a memoryview
    # fails at load with TypeError), so it gets a copy: bytes(k).
    code = cuda_core.ObjectCode.from_cubin(bytes(k), name="scale", symbol_mapping=k.lowered_names)
    assert code.code_type == "cubin"
    assert bytes(code.code) == bytes(k)
    assert code.symbol_mapping == k.lowered_names
    if HAVE_GPU:
        pytest.skip("a GPU is present: test_gpu.py loads it")
    with pytest.raises(Exception) as caught:
        code.get_kernel("scale<float>")
    chain = error_chain(caught.value)
    # cuda.core finds libcuda through cuda.pathfinder; on a machine without the driver library
    # that is DynamicLibNotFoundError; with a driver library but no GPU, a CUDA error.
    assert ("DynamicLibNotFoundError" in chain and "driver" in chain) or "CUDA_ERROR" in chain, chain


def test_cupy_takes_the_cubin(client: kcache.Client, manifest_kernels: dict,
                              tmp_path: Path) -> None:
    cupy = pytest.importorskip("cupy")
    k = client.resolve(manifest_kernels["axpy"], DEVICE)
    path = tmp_path / "axpy.cubin"
    path.write_bytes(k.data)
    module = cupy.RawModule(path=str(path))  # CuPy loads it on first use
    if HAVE_GPU:
        pytest.skip("a GPU is present: test_gpu.py loads it")
    with pytest.raises(Exception) as caught:
        module.get_function("axpy")
    chain = error_chain(caught.value)
    # Without libcuda CuPy's runtime reports the driver as insufficient; without a GPU, no device.
    assert ("cudaErrorInsufficientDriver" in chain or "cudaErrorNoDevice" in chain
            or "CUDA_ERROR_NO_DEVICE" in chain), chain


def test_cuda_core_packs_the_launch_arguments() -> None:
    """The arguments test_gpu.py launches axpy with are packed by cuda.core as the kernel's
    parameters (float, pointer, pointer, int), without a GPU: cuda.core's parameter holder is
    what `cuda.core.launch` builds from them."""
    import ctypes

    pytest.importorskip("cuda.core")
    from cuda.core import _kernel_arg_handler  # the holder launch() builds

    from launch_args import axpy_launch_args

    x_ptr, y_ptr = 0x7F0000001000, 0x7F0000002000
    holder = _kernel_arg_handler.ParamHolder(axpy_launch_args(x_ptr, y_ptr, 1000))
    params = ctypes.cast(holder.ptr, ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.cast(params[0], ctypes.POINTER(ctypes.c_float))[0] == 2.0
    assert ctypes.cast(params[1], ctypes.POINTER(ctypes.c_uint64))[0] == x_ptr
    assert ctypes.cast(params[2], ctypes.POINTER(ctypes.c_uint64))[0] == y_ptr
    assert ctypes.cast(params[3], ctypes.POINTER(ctypes.c_int32))[0] == 1000
