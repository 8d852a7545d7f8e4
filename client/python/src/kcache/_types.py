"""What a caller hands to a Client: devices and kernels (by source, id or name)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Sequence, Tuple, Union

_HEX_ID = re.compile(r"[0-9a-f]{64}")
_SM = re.compile(r"(?:sm_)?(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Device:
    """The GPU a kernel is for: its SM (8.9 = sm_major 8, sm_minor 9) and the CUDA driver version
    it reports (e.g. 13000; 0 = unknown: the daemon assumes a driver new enough and says so)."""

    sm_major: int
    sm_minor: int
    driver_version: int = 0

    @property
    def arch(self) -> int:
        """The SM as one number: 89."""
        return self.sm_major * 10 + self.sm_minor

    @classmethod
    def parse(cls, sm: str, driver_version: int = 0) -> "Device":
        """Parses "8.9", "sm_89" or "89" (ValueError otherwise)."""
        m = _SM.fullmatch(sm.strip())
        if m is None:
            raise ValueError(f"device {sm!r}: expected an SM such as 8.9, sm_89 or 89")
        if m.group(2) is not None:
            major, minor = int(m.group(1)), int(m.group(2))
        else:
            digits = m.group(1)
            if len(digits) < 2:
                raise ValueError(f"device {sm!r}: expected an SM such as 8.9, sm_89 or 89")
            major, minor = int(digits[:-1]), int(digits[-1])
        if sm.strip().startswith("sm_") and m.group(2) is not None:
            raise ValueError(f"device {sm!r}: expected an SM such as 8.9, sm_89 or 89")
        return cls(major, minor, driver_version)

    def __str__(self) -> str:
        return f"{self.sm_major}.{self.sm_minor}"


@dataclass(frozen=True)
class KernelSource:
    """What a kernel is made of (client/include/kcache/kcache.h, KernelSource). Two sources with
    equal `source`, `headers`, `options` and `name_expressions` are the same kernel (the same
    kernel id); `name` is for display only.

    headers: include name -> content ("common.cuh" satisfies #include "common.cuh").
    options: NVRTC options from the allowlist (never -arch: the device is the target).
    name_expressions: template instantiations to lower, e.g. "softmax<float>"; the result's
      `lowered_names` maps each to its mangled name.
    min_arch, max_arch: the SM range the kernel supports, as 75 / 89 (0 = no bound); a device
      outside it is answered with NotFound.
    """

    name: str
    source: str
    headers: Dict[str, str] = field(default_factory=dict)
    options: Sequence[str] = ()
    name_expressions: Sequence[str] = ()
    min_arch: int = 0
    max_arch: int = 0


@dataclass(frozen=True)
class ById:
    """A kernel the daemon knows, by its kernel id (64 lowercase hex digits). Daemon only: there
    is no source to compile locally."""

    id: str


@dataclass(frozen=True)
class ByName:
    """A kernel the daemon knows, by its display name (as warmed, e.g. "attention.fp16_accum").
    Daemon only."""

    name: str


KernelRef = Union[KernelSource, ById, ByName, str]
"""A kernel to resolve. A plain str is a kernel id when it is exactly 64 lowercase hex digits,
else a name; ById / ByName say which without guessing."""

DeviceLike = Union[Device, str, Tuple[int, int]]


def as_ref(kernel: KernelRef) -> Union[KernelSource, ById, ByName]:
    if isinstance(kernel, (KernelSource, ById, ByName)):
        return kernel
    if isinstance(kernel, str):
        return ById(kernel) if _HEX_ID.fullmatch(kernel) else ByName(kernel)
    raise TypeError(f"kernel: expected KernelSource, ById, ByName or str, got {type(kernel).__name__}")


def as_device(device: DeviceLike) -> Device:
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        return Device.parse(device)
    if isinstance(device, tuple) and len(device) == 2:
        return Device(int(device[0]), int(device[1]))
    raise TypeError(f"device: expected Device, str or (major, minor), got {type(device).__name__}")
