"""Kernel: one resolved artifact, owning libkcache's kcache_kernel handle."""

from __future__ import annotations

import ctypes
from typing import Dict, Optional, Sequence

from . import _native


def _text(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


class _Owner:
    """Frees the kcache_kernel handle when the last holder (the Kernel, or a view of its bytes)
    goes away."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __del__(self) -> None:
        handle, self.handle = self.handle, 0
        if handle and _native._lib is not None:
            _native._lib.kcache_kernel_free(handle)


class Kernel:
    """A resolved kernel: the artifact's bytes and how it was served. Read-only.

    data: a read-only, zero-copy memoryview of the bytes inside libkcache (the daemon's shared
      memory on the in-pod fast path); it keeps the artifact alive, so it stays valid after this
      object is gone. bytes(kernel) copies.
    kind: "cubin", "ptx" or "ltoir". target: "sm_89", "compute_86", ...
    rule: why this artifact may run ("exact_sass", "compatible_sass", "ptx_jit", "compiled");
      reason: one line saying so.
    served_from: "daemon:memory", "daemon:local_store", "daemon:baked_store", "daemon:compile",
      "daemon:shared", "daemon" or "local_compile".
    micros: wall time of the call that returned it. needs_jit: PTX the driver must JIT.
    lowered_names: name expression -> mangled name (see KernelSource.name_expressions).
    toolkit, compile_log: when the library reports them (None otherwise).
    """

    __slots__ = ("_owner", "_data", "kind", "target", "kernel_id", "name", "rule", "reason",
                 "served_from", "micros", "needs_jit", "lowered_names", "toolkit", "compile_log")

    def __init__(self, handle: int, name_expressions: Sequence[str] = ()) -> None:
        lib = _native.lib()
        self._owner = _Owner(handle)
        size = ctypes.c_size_t(0)
        address = lib.kcache_kernel_data(handle, ctypes.byref(size))
        if size.value:
            array = (ctypes.c_char * size.value).from_address(address)
            array._kcache_owner = self._owner  # type: ignore[attr-defined]
            self._data = memoryview(array).cast("B").toreadonly()
        else:
            self._data = memoryview(b"")
        self.kind: str = _text(lib.kcache_kernel_kind(handle))
        self.target: str = _text(lib.kcache_kernel_target(handle))
        self.kernel_id: str = _text(lib.kcache_kernel_id(handle))
        self.name: str = _text(lib.kcache_kernel_name(handle))
        self.rule: str = _text(lib.kcache_kernel_rule(handle))
        self.reason: str = _text(lib.kcache_kernel_reason(handle))
        self.served_from: str = _text(lib.kcache_kernel_served_from(handle))
        self.micros: int = int(lib.kcache_kernel_micros(handle))
        self.needs_jit: bool = bool(lib.kcache_kernel_needs_jit(handle))
        lowered: Dict[str, str] = {}
        if hasattr(lib, "kcache_kernel_lowered_count"):
            for i in range(lib.kcache_kernel_lowered_count(handle)):
                expression_out = ctypes.c_char_p()
                mangled = lib.kcache_kernel_lowered_at(handle, i, ctypes.byref(expression_out))
                lowered[_text(expression_out.value)] = _text(mangled)
        else:
            for expression in name_expressions:
                mangled = lib.kcache_kernel_lowered_name(handle, expression.encode())
                if mangled is not None:
                    lowered[expression] = _text(mangled)
        self.lowered_names: Dict[str, str] = lowered
        self.toolkit: Optional[str] = (_text(lib.kcache_kernel_toolkit(handle))
                                       if hasattr(lib, "kcache_kernel_toolkit") else None)
        self.compile_log: Optional[str] = (_text(lib.kcache_kernel_compile_log(handle))
                                           if hasattr(lib, "kcache_kernel_compile_log") else None)

    @property
    def data(self) -> memoryview:
        """The artifact's bytes: a read-only zero-copy view (format "B")."""
        return self._data

    @property
    def from_daemon(self) -> bool:
        """False when this process compiled it (served_from == "local_compile")."""
        return self.served_from != "local_compile"

    def __bytes__(self) -> bytes:
        return self._data.tobytes()

    def __len__(self) -> int:
        return self._data.nbytes

    def __repr__(self) -> str:
        return (f"<kcache.Kernel {self.name or self.kernel_id[:12]} {self.kind} {self.target} "
                f"{len(self)} bytes {self.rule} from {self.served_from} in {self.micros} us>")
