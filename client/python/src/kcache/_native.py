"""ctypes declarations of libkcache's C ABI (client/include/kcache/kcache_c.h).

The library is the libkcache.so installed next to this file, or the one $KCACHE_LIBRARY names
(a build tree's client/lib/libkcache.so, for tests). Functions that later versions of the ABI
append (kcache_resolve_many, kcache_kernel_toolkit, ...) are declared only when the library has
them; `has(name)` says which.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Optional

c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint32 = ctypes.c_uint32


class Options(ctypes.Structure):
    """kcache_options (kcache_c.h): the same fields and size; later fields take `reserved`."""

    _fields_ = [
        ("address", c_char_p),
        ("client_name", c_char_p),
        ("toolkit_root", c_char_p),
        ("deadline_ms", c_int64),
        ("local_compile_fallback", c_int32),
        ("breaker_failures", c_int32),
        ("breaker_cooldown_ms", c_int64),
        ("fast_path", c_int32),
        ("wait_limit_ms", c_int32),
        ("startup_grace_ms", c_int32),
        ("reserved", c_int32 * 13),
    ]


class DeviceStruct(ctypes.Structure):
    _fields_ = [("sm_major", c_int32), ("sm_minor", c_int32), ("driver_version", c_uint32)]


class GpuStruct(ctypes.Structure):
    """kcache_gpu (kcache_c.h)."""

    _fields_ = [("ordinal", c_int32), ("device", DeviceStruct), ("name", ctypes.c_char * 256),
                ("uuid", ctypes.c_char * 96), ("visible_as", ctypes.c_char * 96),
                ("reserved", c_int32 * 8)]


class Source(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("source", c_char_p),
        ("header_names", ctypes.POINTER(c_char_p)),
        ("header_contents", ctypes.POINTER(c_char_p)),
        ("num_headers", c_size_t),
        ("options", ctypes.POINTER(c_char_p)),
        ("num_options", c_size_t),
        ("name_expressions", ctypes.POINTER(c_char_p)),
        ("num_name_expressions", c_size_t),
        ("min_arch", c_int32),
        ("max_arch", c_int32),
    ]


class KernelRef(ctypes.Structure):
    """kcache_kernel_ref: exactly one of source, id, name is set."""

    _fields_ = [("source", ctypes.POINTER(Source)), ("id", c_char_p), ("name", c_char_p)]


# void (*)(void* context, size_t index, int status, const char* message, kcache_kernel* kernel)
RESOLVE_MANY_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_int, c_char_p, c_void_p)

# void (*)(void* context, size_t first_gpu, size_t index, int status, const char* message,
#         kcache_kernel* kernel)
RESOLVE_FOR_GPUS_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_size_t, c_int, c_char_p,
                                             c_void_p)


class ProgressStruct(ctypes.Structure):
    """kcache_progress: where the daemon is with a kernel it compiles."""

    _fields_ = [("index", c_size_t), ("stage", c_int32), ("queued_behind", ctypes.c_uint32),
                ("elapsed_ms", c_int64), ("compiling_ms", c_int64), ("expected_ms", c_int64)]


# void (*)(void* context, const kcache_progress* progress)
PROGRESS_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(ProgressStruct))

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def library_path() -> str:
    """The libkcache.so this package loads: $KCACHE_LIBRARY, else the one inside the package."""
    override = os.environ.get("KCACHE_LIBRARY")
    if override:
        return override
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libkcache.so")


def _declare(lib: ctypes.CDLL) -> None:
    def fn(name: str, restype, *argtypes) -> None:  # type: ignore[no-untyped-def]
        if not hasattr(lib, name):
            return
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    kernel_pp = ctypes.POINTER(c_void_p)
    fn("kcache_version", c_char_p)
    fn("kcache_last_error", c_char_p)
    fn("kcache_options_init", None, ctypes.POINTER(Options))
    fn("kcache_connect", c_int, ctypes.POINTER(Options), kernel_pp)
    fn("kcache_client_free", None, c_void_p)
    fn("kcache_resolve", c_int, c_void_p, ctypes.POINTER(Source), ctypes.POINTER(DeviceStruct), kernel_pp)
    fn("kcache_resolve_by_name", c_int, c_void_p, c_char_p, ctypes.POINTER(DeviceStruct), kernel_pp)
    fn("kcache_resolve_by_id", c_int, c_void_p, c_char_p, ctypes.POINTER(DeviceStruct), kernel_pp)
    fn("kcache_kernel_free", None, c_void_p)
    fn("kcache_kernel_data", c_void_p, c_void_p, ctypes.POINTER(c_size_t))
    for accessor in ("kind", "target", "id", "name", "rule", "reason", "served_from",
                     "toolkit", "compile_log"):
        fn("kcache_kernel_" + accessor, c_char_p, c_void_p)
    fn("kcache_kernel_needs_jit", c_int, c_void_p)
    fn("kcache_kernel_from_daemon", c_int, c_void_p)
    fn("kcache_kernel_micros", c_int64, c_void_p)
    fn("kcache_kernel_lowered_name", c_char_p, c_void_p, c_char_p)
    fn("kcache_kernel_lowered_count", c_size_t, c_void_p)
    fn("kcache_kernel_lowered_at", c_char_p, c_void_p, c_size_t, ctypes.POINTER(c_char_p))
    fn("kcache_resolve_many", c_int, c_void_p, ctypes.POINTER(KernelRef), c_size_t,
       ctypes.POINTER(DeviceStruct), RESOLVE_MANY_CALLBACK, c_void_p)
    fn("kcache_detect_devices", c_int, ctypes.POINTER(DeviceStruct), c_int, ctypes.POINTER(c_int))
    fn("kcache_stat_json", c_int, c_void_p, ctypes.POINTER(c_void_p))
    fn("kcache_string_free", None, c_void_p)
    fn("kcache_manifest_load", c_int, c_char_p, ctypes.POINTER(c_void_p))
    fn("kcache_manifest_count", c_size_t, c_void_p)
    fn("kcache_manifest_kernel", ctypes.POINTER(Source), c_void_p, c_size_t)
    fn("kcache_manifest_free", None, c_void_p)
    fn("kcache_detect_gpus", c_int, ctypes.POINTER(GpuStruct), c_int, ctypes.POINTER(c_int))
    fn("kcache_kernel_check_gpu", c_int, c_void_p, ctypes.POINTER(GpuStruct))
    fn("kcache_kernel_entry_points", c_int, c_void_p, ctypes.POINTER(c_void_p))
    fn("kcache_resolve_for_gpus", c_int, c_void_p, ctypes.POINTER(KernelRef), c_size_t,
       ctypes.POINTER(GpuStruct), c_size_t, ctypes.POINTER(c_size_t), RESOLVE_FOR_GPUS_CALLBACK,
       c_void_p)
    fn("kcache_set_progress_callback", None, c_void_p, PROGRESS_CALLBACK, c_void_p)


def lib() -> ctypes.CDLL:
    """The loaded library (loaded once, on first use)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                path = library_path()
                try:
                    loaded = ctypes.CDLL(path)
                except OSError as e:
                    raise ImportError(
                        f"kcache: cannot load libkcache from {path}: {e} "
                        "(set KCACHE_LIBRARY, or reinstall the package)") from e
                _declare(loaded)
                _lib = loaded
    return _lib


def has(name: str) -> bool:
    """Whether the loaded library exports the C function `name` (e.g. kcache_resolve_many)."""
    return hasattr(lib(), name)


def last_error() -> str:
    message = lib().kcache_last_error()
    return message.decode("utf-8", "replace") if message else ""
