"""Exceptions of the kcache package: one class per failure a caller handles differently.

Every failure of libkcache is a canonical status code (the gRPC / absl numbers) and a message;
`Error.code` is the number, `Error.code_name` its name, `Error.reason` the message.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

CODE_NAMES: Dict[int, str] = {
    1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
    6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED",
    13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}


class Error(Exception):
    """A failed kcache call. `code`: the status code (int); `reason`: the library's message."""

    code: int
    reason: str

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{CODE_NAMES.get(code, str(code))}: {reason}")
        self.code = code
        self.reason = reason

    @property
    def code_name(self) -> str:
        """The code's name: "NOT_FOUND", "UNAVAILABLE", ..."""
        return CODE_NAMES.get(self.code, str(self.code))


class InvalidArgument(Error):
    """A refused request: an option outside the allowlist, a malformed id or device (code 3)."""


class DeadlineExceeded(Error):
    """The daemon did not answer within the deadline and nothing could compile it (code 4)."""


class NotFound(Error):
    """No artifact: the device is outside the kernel's arch range, the kernel is unknown to the
    daemon (by id or name), or there is no driver (detect_devices) (code 5)."""


class FailedPrecondition(Error):
    """Something needed is missing, e.g. no CUDA toolkit loads for a local compile (code 9)."""


class CompileError(Error):
    """NVRTC refused the source (code 10, ABORTED). `log` is the compiler's log; `reason` the
    whole message (its first line names the kernel, its id and the target)."""

    log: str

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(code, reason)
        head, sep, tail = reason.partition("\n")
        self.log = tail if sep else reason

    def __str__(self) -> str:
        return f"ABORTED: {self.reason}"


class Unavailable(Error):
    """The daemon could not be reached (or its circuit is open) and there was no fallback
    (code 14)."""


class DataLoss(Error):
    """A transfer from the daemon arrived damaged (code 15)."""


_BY_CODE: Dict[int, Type[Error]] = {
    3: InvalidArgument, 4: DeadlineExceeded, 5: NotFound, 9: FailedPrecondition,
    10: CompileError, 14: Unavailable, 15: DataLoss,
}


def error_for(code: int, reason: str) -> Error:
    """The exception for status `code` with `reason`."""
    return _BY_CODE.get(code, Error)(code, reason)


def raise_for(code: int, reason: Optional[str] = None) -> None:
    """Raises the exception for `code` (with the calling thread's last error) unless it is 0."""
    if code == 0:
        return
    if reason is None:
        from . import _native

        reason = _native.last_error()
    raise error_for(code, reason)
