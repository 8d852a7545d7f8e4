"""A node's GPUs: detecting them, checking that a kernel runs on one before loading it there
(cuda.core or CuPy), and resolving for all of them at once, one artifact per distinct SM
(docs/python.md, "A node's GPUs"). The checks are libkcache's (kcache_kernel_check_gpu), the
serving rules the daemon applies."""

from __future__ import annotations

import ctypes
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from . import _native
from ._client import Client, Result, _ref_array
from ._kernel import Kernel
from ._types import Device, DeviceLike, KernelRef, as_device, as_ref
from .errors import Error, error_for, raise_for


@dataclass(frozen=True)
class Gpu:
    """One GPU the process sees (detect_gpus) or one described (pretend_gpus).

    ordinal: its CUDA device ordinal in this process. device: its SM and the driver's version.
    name: "NVIDIA H100 80GB HBM3". uuid: "GPU-..." or "MIG-...". visible_as: the
    CUDA_VISIBLE_DEVICES entry that selected it ("" when unset or not matched).
    """

    ordinal: int
    device: Device
    name: str = ""
    uuid: str = ""
    visible_as: str = ""

    def __str__(self) -> str:
        return f"GPU {self.ordinal} ({self.name or 'unnamed'}, sm_{self.device.arch})"


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _to_c(gpu: Gpu) -> _native.GpuStruct:
    out = _native.GpuStruct()
    out.ordinal = gpu.ordinal
    out.device = _native.DeviceStruct(gpu.device.sm_major, gpu.device.sm_minor,
                                      gpu.device.driver_version)
    out.name = gpu.name.encode("utf-8")[:255]
    out.uuid = gpu.uuid.encode("utf-8")[:95]
    out.visible_as = gpu.visible_as.encode("utf-8")[:95]
    return out


def detect_gpus() -> List[Gpu]:
    """Every GPU the process sees, in the driver's order (CUDA_VISIBLE_DEVICES and MIG applied),
    through the CUDA driver libkcache dlopens. [] without a driver or a GPU."""
    lib = _native.lib()
    capacity = 64
    gpus = (_native.GpuStruct * capacity)()
    count = ctypes.c_int(0)
    code = lib.kcache_detect_gpus(gpus, capacity, ctypes.byref(count))
    if code == 5:  # NOT_FOUND: no driver or no GPU
        return []
    raise_for(code)
    return [Gpu(g.ordinal, Device(g.device.sm_major, g.device.sm_minor, g.device.driver_version),
                _text(g.name), _text(g.uuid), _text(g.visible_as))
            for g in gpus[:min(count.value, capacity)]]


def pretend_gpus(devices: Sequence[DeviceLike]) -> List[Gpu]:
    """GPUs that are not there, to resolve for as if they were: ordinal i is devices[i]."""
    out = []
    for i, d in enumerate(devices):
        device = as_device(d)
        out.append(Gpu(i, device, f"pretend sm_{device.arch}"))
    return out


def check_runs_on(kernel: Kernel, gpu: Gpu) -> None:
    """Raises FailedPrecondition unless `kernel` runs on `gpu` by the serving rules and its
    driver loads it ("softmax is sm_89 SASS; GPU 0 is NVIDIA H100 (sm_90): resolve it for 9.0
    ..."); InvalidArgument for LTO-IR. Calls no driver."""
    gpu_c = _to_c(gpu)
    raise_for(_native.lib().kcache_kernel_check_gpu(kernel._owner.handle, ctypes.byref(gpu_c)))


def entry_points(kernel: Kernel) -> List[str]:
    """The kernel's entry points (extern "C" and lowered names), as load() looks them up."""
    lib = _native.lib()
    text = ctypes.c_void_p()
    raise_for(lib.kcache_kernel_entry_points(kernel._owner.handle, ctypes.byref(text)))
    try:
        names = ctypes.string_at(text.value).decode("utf-8") if text.value else ""
    finally:
        lib.kcache_string_free(text.value)
    return names.split("\n") if names else []


def load(kernel: Kernel, gpu: Gpu, via: str = "cuda.core") -> Dict[str, Any]:
    """Loads `kernel` on `gpu` with cuda.core (via="cuda.core") or CuPy (via="cupy") and looks up
    every entry point, so a kernel that cannot run there fails here, not at its first launch.
    Checks first (check_runs_on). Returns entry point -> the library's kernel object (a
    cuda.core Kernel, a cupy RawKernel), with each name expression of kernel.lowered_names as a
    key too."""
    check_runs_on(kernel, gpu)
    names = entry_points(kernel)
    if via == "cuda.core":
        functions = _load_cuda_core(kernel, gpu, names)
    elif via == "cupy":
        functions = _load_cupy(kernel, gpu, names)
    else:
        raise ValueError(f"via: expected 'cuda.core' or 'cupy', got {via!r}")
    for expression, lowered in kernel.lowered_names.items():
        if lowered in functions:
            functions[expression] = functions[lowered]
    return functions


def _load_cuda_core(kernel: Kernel, gpu: Gpu, names: Sequence[str]) -> Dict[str, Any]:
    from cuda.core import Device as CudaDevice
    from cuda.core import ObjectCode

    CudaDevice(gpu.ordinal).set_current()
    data = bytes(kernel)  # cuda.core's loader takes only bytes
    code = ObjectCode.from_cubin(data) if kernel.kind == "cubin" else ObjectCode.from_ptx(data)
    return {name: code.get_kernel(name) for name in names}


def _load_cupy(kernel: Kernel, gpu: Gpu, names: Sequence[str]) -> Dict[str, Any]:
    import cupy

    suffix = ".cubin" if kernel.kind == "cubin" else ".ptx"
    with tempfile.TemporaryDirectory() as directory:  # RawModule takes a file
        path = os.path.join(directory, "kernel" + suffix)
        with open(path, "wb") as f:
            f.write(kernel.data)
        with cupy.cuda.Device(gpu.ordinal):
            module = cupy.RawModule(path=path)
            return {name: module.get_function(name) for name in names}


class NodeKernels:
    """What resolve_for_gpus returns. gpus: as given. devices: the distinct devices, in the
    order of their first GPU. device_of_gpu[g]: the index in `devices` of GPU g's device.
    kernels[d]: the results (Kernel or Error, in the order asked) for devices[d]."""

    def __init__(self, gpus: List[Gpu], devices: List[Device], device_of_gpu: List[int],
                 kernels: List[List[Result]]) -> None:
        self.gpus, self.devices = gpus, devices
        self.device_of_gpu, self.kernels = device_of_gpu, kernels

    def for_gpu(self, g: int) -> List[Result]:
        """The kernels GPU g runs (shared with every GPU of the same SM)."""
        return self.kernels[self.device_of_gpu[g]]


def resolve_for_gpus(client: Client, kernels: Sequence[KernelRef],
                     gpus: Optional[Sequence[Gpu]] = None) -> NodeKernels:
    """Every kernel of `kernels` for every GPU of `gpus` (default: detect_gpus()) in one call:
    one batch per distinct device (SM and driver), all at once, not one per GPU. Raises
    NotFound when gpus is None and the process sees no GPU."""
    if gpus is None:
        gpus = detect_gpus()
        if not gpus:
            raise error_for(5, "no GPU: the CUDA driver sees none (or there is no driver); "
                               "pass gpus=kcache.pretend_gpus([...]) to resolve for GPUs anyway")
    gpu_list = list(gpus)
    refs = [as_ref(k) for k in kernels]
    keep: List[Any] = []
    array = _ref_array(refs, keep)
    gpu_array = (_native.GpuStruct * max(len(gpu_list), 1))(*[_to_c(g) for g in gpu_list])
    device_of_gpu = (ctypes.c_size_t * max(len(gpu_list), 1))()
    by_first: Dict[int, List[Optional[Result]]] = {}

    def on_kernel(context: Any, first_gpu: int, index: int, status: int,
                  message: Optional[bytes], kernel: Optional[int]) -> None:
        try:
            result: Result = (Kernel(kernel) if status == 0 and kernel else
                              error_for(status or 2, (message or b"").decode("utf-8", "replace")))
        except BaseException as e:  # never let an exception unwind into C
            result = Error(2, f"kcache: reading kernel {index}: {e!r}")
        by_first.setdefault(first_gpu, [None] * len(refs))[index] = result

    callback = _native.RESOLVE_FOR_GPUS_CALLBACK(on_kernel)
    raise_for(_native.lib().kcache_resolve_for_gpus(
        client._live(), array, len(refs), gpu_array, len(gpu_list), device_of_gpu, callback,
        None))
    firsts: List[int] = []
    for g in range(len(gpu_list)):
        if device_of_gpu[g] not in firsts:
            firsts.append(device_of_gpu[g])
    return NodeKernels(gpu_list, [gpu_list[f].device for f in firsts],
                       [firsts.index(device_of_gpu[g]) for g in range(len(gpu_list))],
                       [by_first.get(f, [])  # type: ignore[misc]
                        for f in firsts])
