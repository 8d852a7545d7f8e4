"""Client: a connection to kcached with libkcache's fail-open behaviour (see docs/python.md)."""

from __future__ import annotations

import ctypes
import json
import queue
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _native
from ._kernel import Kernel
from ._progress import Progress, progress_callback
from ._types import ById, ByName, Device, DeviceLike, KernelRef, KernelSource, as_device, as_ref
from .errors import Error, error_for, raise_for

Result = Union[Kernel, Error]
"""One kernel of a batch: its Kernel, or the Error that kernel alone failed with."""


def _b(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else text.encode("utf-8", "surrogateescape")


def _strings(items: Sequence[str], keep: List[Any]) -> "ctypes.Array[ctypes.c_char_p]":
    array = (ctypes.c_char_p * max(len(items), 1))(*[_b(s) for s in items])
    keep.append(array)
    return array


def _source_struct(source: KernelSource, keep: List[Any]) -> _native.Source:
    """The kcache_source of `source`; `keep` holds every buffer it points into."""
    names = sorted(source.headers)
    s = _native.Source()
    s.name = _b(source.name)
    s.source = _b(source.source)
    s.header_names = _strings(names, keep)
    s.header_contents = _strings([source.headers[n] for n in names], keep)
    s.num_headers = len(names)
    s.options = _strings(list(source.options), keep)
    s.num_options = len(source.options)
    s.name_expressions = _strings(list(source.name_expressions), keep)
    s.num_name_expressions = len(source.name_expressions)
    s.min_arch = source.min_arch
    s.max_arch = source.max_arch
    keep.append(s)
    return s


def _ref_array(refs: Sequence[Union[KernelSource, ById, ByName]],
               keep: List[Any]) -> "ctypes.Array[_native.KernelRef]":
    """The kcache_kernel_ref array of `refs`; `keep` holds every buffer it points into."""
    array = (_native.KernelRef * max(len(refs), 1))()
    for i, ref in enumerate(refs):
        if isinstance(ref, KernelSource):
            array[i].source = ctypes.pointer(_source_struct(ref, keep))
        elif isinstance(ref, ById):
            array[i].id = ref.id.encode()
        else:
            array[i].name = _b(ref.name)
    return array


def _device_struct(device: Device) -> _native.DeviceStruct:
    return _native.DeviceStruct(device.sm_major, device.sm_minor, device.driver_version)


class Client:
    """A client of kcached (libkcache's Client, through its C ABI). Thread-safe: one Client serves
    every thread of a worker; calls release the GIL while they wait.

    address: where kcached listens ("unix:///run/kcache/kcache.sock", "unix:rel.sock",
      "localhost:7071", or a bare absolute socket path). None = $KCACHE_ADDRESS, else
      unix:///run/kcache/kcache.sock.
    deadline: seconds without word from the daemon after which a call gives up on it (a
      kernel the daemon is compiling is waited for while it says so; docs/client.md).
    local_compile_fallback: when the daemon cannot answer, compile a KernelSource in this process
      with NVRTC (from `toolkit_root`: None = $CUDA_HOME, else /usr/local/cuda).
    breaker_failures, breaker_cooldown: after that many consecutive daemon failures the client
      stops calling the daemon for `breaker_cooldown` seconds (0 failures = never stop).
    client_name: sent with every request, for the daemon's logs (None = "pid-<pid>").
    fast_path: take the in-pod zero-copy path for stored kernels (False: gRPC only).
    wait_limit: seconds, the longest wait for a kernel the daemon compiles (None = the daemon's
      compile limit).
    startup_grace: seconds the first calls wait for a kcached that is not there yet (its
      socket missing or refusing) before compiling here; 0 = do not wait (None =
      $KCACHE_STARTUP_GRACE, else 5).
    on_progress: called with a Progress each time the daemon says where a compile it runs for
      a call is (about every 0.5 s per waiting kernel), on the thread making the call, inside
      it: keep it short and do not call this Client from it. An exception it raises is
      printed and ignored.

    Never waits for the daemon here: it connects on first use. Raises InvalidArgument for bad
    options.
    """

    def __init__(self, address: Optional[str] = None, deadline: float = 2.0,
                 local_compile_fallback: bool = True, toolkit_root: Optional[str] = None,
                 breaker_failures: int = 3, breaker_cooldown: float = 10.0,
                 client_name: Optional[str] = None, fast_path: bool = True,
                 wait_limit: Optional[float] = None,
                 startup_grace: Optional[float] = None,
                 on_progress: Optional[Callable[[Progress], None]] = None) -> None:
        self._handle: Optional[int] = None
        self._on_progress: Any = None  # the C callback, alive as long as the handle
        lib = _native.lib()
        options = _native.Options()
        lib.kcache_options_init(ctypes.byref(options))
        keep = [_b(address), _b(client_name), _b(toolkit_root)]
        options.address, options.client_name, options.toolkit_root = keep
        options.deadline_ms = int(round(deadline * 1000))
        options.local_compile_fallback = 1 if local_compile_fallback else 0
        options.breaker_failures = breaker_failures
        options.breaker_cooldown_ms = int(round(breaker_cooldown * 1000))
        options.fast_path = 1 if fast_path else 0
        if wait_limit is not None:
            options.wait_limit_ms = int(round(wait_limit * 1000))
        if startup_grace is not None:
            options.startup_grace_ms = int(round(startup_grace * 1000))
        handle = ctypes.c_void_p()
        raise_for(lib.kcache_connect(ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle.value
        if on_progress is not None:
            if not _native.has("kcache_set_progress_callback"):
                self.close()
                raise ValueError(f"on_progress: {_native.library_path()} is too old to report "
                                 "progress; use the libkcache.so of this package")
            self._on_progress = progress_callback(on_progress)
            lib.kcache_set_progress_callback(self._handle, self._on_progress, None)

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        """Releases the connection. Kernels already returned stay valid."""
        handle, self._handle = self._handle, None
        if handle:
            _native.lib().kcache_client_free(handle)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if self._handle and _native._lib is not None:
            self.close()

    def _live(self) -> int:
        if not self._handle:
            raise ValueError("kcache.Client is closed")
        return self._handle

    # -- one kernel ------------------------------------------------------------------------
    def resolve(self, kernel: KernelRef, device: DeviceLike) -> Kernel:
        """The kernel for `device` (docs/serving-rules.md): from the daemon, which compiles a
        miss once for every worker; or, when the daemon is away and local_compile_fallback is
        on, compiled here (a KernelSource only). `kernel` is a KernelSource, ById, ByName, or a
        str (64 lowercase hex digits: an id; anything else: a name). `device` is a Device, "8.9"
        or (8, 9).

        Raises NotFound (outside the kernel's arch range; unknown id or name), InvalidArgument
        (a refused option), CompileError (with the NVRTC log), Unavailable / DeadlineExceeded /
        DataLoss (the daemon failed and nothing could compile it).
        """
        ref = as_ref(kernel)
        dev = _device_struct(as_device(device))
        lib = _native.lib()
        out = ctypes.c_void_p()
        if isinstance(ref, KernelSource):
            keep: List[Any] = []
            source = _source_struct(ref, keep)
            code = lib.kcache_resolve(self._live(), ctypes.byref(source), ctypes.byref(dev),
                                      ctypes.byref(out))
            expressions: Sequence[str] = ref.name_expressions
        elif isinstance(ref, ById):
            code = lib.kcache_resolve_by_id(self._live(), ref.id.encode(), ctypes.byref(dev),
                                            ctypes.byref(out))
            expressions = ()
        else:
            code = lib.kcache_resolve_by_name(self._live(), ref.name.encode("utf-8"),
                                              ctypes.byref(dev), ctypes.byref(out))
            expressions = ()
        raise_for(code)
        return Kernel(out.value, expressions)  # type: ignore[arg-type]

    def resolve_id(self, kernel_id: str, device: DeviceLike) -> Kernel:
        """resolve(ById(kernel_id), device): a kernel the daemon knows, by its 64-digit id."""
        return self.resolve(ById(kernel_id), device)

    def resolve_name(self, name: str, device: DeviceLike) -> Kernel:
        """resolve(ByName(name), device): a kernel the daemon knows, by name."""
        return self.resolve(ByName(name), device)

    # -- many kernels ----------------------------------------------------------------------
    def resolve_many(self, kernels: Sequence[KernelRef], device: DeviceLike) -> List[Result]:
        """Every kernel of `kernels` for `device`, in order: a Kernel, or the Error that kernel
        failed with (one kernel's failure never fails the others). One batch call
        (kcache_resolve_many: stored kernels first, compiles as they finish) when the library
        has it, else one resolve per kernel. Raises only for a bad argument (TypeError,
        ValueError, InvalidArgument)."""
        refs = [as_ref(k) for k in kernels]
        dev = as_device(device)
        results: List[Optional[Result]] = [None] * len(refs)
        if not refs:
            return []
        if _native.has("kcache_resolve_many"):
            def store(index: int, result: Result) -> None:
                results[index] = result

            self._resolve_many_native(refs, dev, store)
        else:
            for index, ref in enumerate(refs):
                results[index] = self._resolve_or_error(ref, dev)
        return results  # type: ignore[return-value]

    def resolve_iter(self, kernels: Sequence[KernelRef],
                     device: DeviceLike) -> Iterator[Tuple[int, Result]]:
        """As resolve_many, but yields (index, Kernel or Error) as each kernel arrives (the
        batch runs on a helper thread; the GIL is released while it waits)."""
        refs = [as_ref(k) for k in kernels]
        dev = as_device(device)
        if not refs:
            return
        if not _native.has("kcache_resolve_many"):
            for index, ref in enumerate(refs):
                yield index, self._resolve_or_error(ref, dev)
            return
        arrived: "queue.SimpleQueue[Tuple[int, Any]]" = queue.SimpleQueue()
        end = object()

        def run() -> None:
            try:
                self._resolve_many_native(refs, dev, lambda i, r: arrived.put((i, r)))
            except BaseException as e:  # re-raised by the iterator
                arrived.put((-1, e))
            arrived.put((-1, end))

        worker = threading.Thread(target=run, name="kcache-resolve-iter", daemon=True)
        worker.start()
        try:
            while True:
                index, item = arrived.get()
                if index >= 0:
                    yield index, item
                elif item is end:
                    break
                else:
                    raise item
        finally:
            worker.join()

    def _resolve_or_error(self, ref: Union[KernelSource, ById, ByName], device: Device) -> Result:
        try:
            return self.resolve(ref, device)
        except Error as e:
            return e

    def _resolve_many_native(self, refs: Sequence[Union[KernelSource, ById, ByName]],
                             device: Device, on_result: Callable[[int, Result], None]) -> None:
        """kcache_resolve_many on this thread; `on_result(index, result)` once per kernel."""
        lib = _native.lib()
        keep: List[Any] = []
        array = _ref_array(refs, keep)
        dev = _device_struct(device)

        def on_kernel(context: Any, index: int, status: int, message: Optional[bytes],
                      kernel: Optional[int]) -> None:
            try:
                if status == 0 and kernel:
                    result: Result = Kernel(kernel)
                else:
                    result = error_for(status or 2, (message or b"").decode("utf-8", "replace"))
            except BaseException as e:  # never let an exception unwind into C
                result = Error(2, f"kcache: reading kernel {index}: {e!r}")
            on_result(index, result)

        callback = _native.RESOLVE_MANY_CALLBACK(on_kernel)
        code = lib.kcache_resolve_many(self._live(), array, len(refs), ctypes.byref(dev),
                                       callback, None)
        raise_for(code)

    # -- administration --------------------------------------------------------------------
    def stat(self) -> Dict[str, Any]:
        """The daemon's statistics (kcache stat --server), as a dict."""
        text = ctypes.c_void_p()
        lib = _native.lib()
        raise_for(lib.kcache_stat_json(self._live(), ctypes.byref(text)))
        address = text.value or 0
        try:
            stats: Dict[str, Any] = json.loads(ctypes.string_at(address).decode("utf-8"))
            return stats
        finally:
            lib.kcache_string_free(address)
