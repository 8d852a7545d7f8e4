"""Kernel arguments in the form every cuda.core from 1.0 and CuPy accept (docs/python.md,
"Launching"): scalars as NumPy scalars of the kernel's parameter type, device pointers as plain
Python ints (cuda.core) or CuPy arrays (CuPy). ctypes pointers (`ctypes.c_void_p`) are refused
by cuda.core ("the argument is of unsupported type"), so none are used."""

from __future__ import annotations

from typing import Any, Tuple

import numpy


def axpy_launch_args(x: Any, y: Any, n: int) -> Tuple[Any, ...]:
    """The arguments of tests/python/testdata's `axpy(float a, const float* x, float* y, int n)`
    for a = 2: x and y are device pointers (ints) for cuda.core, or CuPy arrays for CuPy."""
    return (numpy.float32(2.0), x, y, numpy.int32(n))
