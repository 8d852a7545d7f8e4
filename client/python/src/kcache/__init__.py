"""kcache: compiled CUDA kernels for inference workers, from kcached (the ahead-of-time kernel
compilation cache in the pod) or, when it is away, compiled in this process with NVRTC.

    import kcache
    client = kcache.Client()                        # $KCACHE_ADDRESS or the default socket
    device = kcache.detect_devices()[0]             # or kcache.Device.parse("8.9")
    k = client.resolve(kcache.KernelSource(name="axpy", source=src), device)
    module = cuda.core.ObjectCode.from_cubin(bytes(k))   # k.data: zero-copy, read-only

A thin layer over libkcache's C ABI (kcache_c.h, loaded with ctypes; the libkcache.so inside
this package, or $KCACHE_LIBRARY). docs/python.md.
"""

from __future__ import annotations

from typing import List

from . import _native
from ._client import Client, Result
from ._gpus import (Gpu, NodeKernels, check_runs_on, detect_gpus, entry_points, load, pretend_gpus,
                    resolve_for_gpus)
from ._kernel import Kernel
from ._manifest import load_manifest
from ._progress import Progress
from ._types import ById, ByName, Device, DeviceLike, KernelRef, KernelSource
from .errors import (CompileError, DataLoss, DeadlineExceeded, Error, FailedPrecondition,
                     InvalidArgument, NotFound, Unavailable)

__all__ = [
    "ById", "ByName", "Client", "CompileError", "DataLoss", "DeadlineExceeded", "Device",
    "DeviceLike", "Error", "FailedPrecondition", "InvalidArgument", "Kernel", "KernelRef",
    "KernelSource", "NotFound", "Progress", "Result", "Unavailable", "detect_devices", "library_version",
    "library_path", "load_manifest", "Gpu", "NodeKernels", "check_runs_on", "detect_gpus",
    "entry_points", "load", "pretend_gpus", "resolve_for_gpus",
]

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libkcache."""
    version: bytes = _native.lib().kcache_version()
    return version.decode()


def library_path() -> str:
    """The path of the libkcache.so this package loads."""
    return _native.library_path()


def detect_devices() -> List[Device]:
    """The machine's GPUs' devices (SM and driver), through the CUDA driver (dlopen'd by
    libkcache; never linked). [] when there is no driver, only the toolkit's stub driver, or no
    GPU. detect_gpus() gives each GPU's ordinal, name and UUID too."""
    return [gpu.device for gpu in detect_gpus()]
