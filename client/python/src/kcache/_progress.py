"""Progress: where kcached is with a kernel it compiles for a call (docs/python.md, "Progress"),
as a Client's on_progress receives it."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Callable

from . import _native

_STAGES = ("unknown", "queued", "compiling", "shared")


@dataclass(frozen=True)
class Progress:
    """One progress message of the daemon for one kernel.

    index: the kernel's index in a resolve_many batch (0 for one kernel).
    stage: "queued" (waiting for a free compile worker), "compiling", "shared" (in the shared
      tier, or compiled by another daemon of the fleet) or "unknown" (not said yet, or an
      older daemon).
    queued_behind: when queued, the compiles running plus those ahead of it.
    elapsed: seconds since the daemon accepted the call.
    compiling_for: when compiling, seconds since the compile started.
    expected: seconds a compile of the same kernel took before (another target or toolkit);
      0.0 when not known.
    """

    index: int
    stage: str
    queued_behind: int
    elapsed: float
    compiling_for: float
    expected: float


def progress_callback(on_progress: Callable[[Progress], None]) -> Any:
    """The C callback that hands each kcache_progress to `on_progress` (keep it alive as long
    as the client that calls it)."""

    def call(_context: Any, p: "ctypes._Pointer[_native.ProgressStruct]") -> None:
        s = p.contents
        stage = _STAGES[s.stage] if 0 <= s.stage < len(_STAGES) else "unknown"
        on_progress(Progress(s.index, stage, s.queued_behind, s.elapsed_ms / 1000,
                             s.compiling_ms / 1000, s.expected_ms / 1000))

    return _native.PROGRESS_CALLBACK(call)
