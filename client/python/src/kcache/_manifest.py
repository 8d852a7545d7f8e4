"""load_manifest: the kernels of a kcache manifest, read by libkcache (the reader of
`kcache warm`), so their kernel ids are the ones a warmed store holds."""

from __future__ import annotations

import ctypes
import os
from typing import List, Union

from . import _native
from ._types import KernelSource
from .errors import raise_for


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _list(array: "ctypes._Pointer[ctypes.c_char_p]", count: int) -> List[str]:
    return [_text(array[i]) for i in range(count)]


def load_manifest(path: Union[str, "os.PathLike[str]"]) -> List[KernelSource]:
    """The kernels of the manifest at `path` (docs/manifest.md), in its order; a variant is a
    kernel of its own ("attention.fp16_accum"). Raises InvalidArgument (the message names the
    file, line and field) or NotFound (a missing file)."""
    lib = _native.lib()
    handle = ctypes.c_void_p()
    raise_for(lib.kcache_manifest_load(os.fsencode(path), ctypes.byref(handle)))
    try:
        kernels = []
        for i in range(lib.kcache_manifest_count(handle)):
            s = lib.kcache_manifest_kernel(handle, i).contents
            names = _list(s.header_names, s.num_headers)
            contents = _list(s.header_contents, s.num_headers)
            kernels.append(KernelSource(
                name=_text(s.name), source=_text(s.source), headers=dict(zip(names, contents)),
                options=tuple(_list(s.options, s.num_options)),
                name_expressions=tuple(_list(s.name_expressions, s.num_name_expressions)),
                min_arch=s.min_arch, max_arch=s.max_arch))
        return kernels
    finally:
        lib.kcache_manifest_free(handle)
