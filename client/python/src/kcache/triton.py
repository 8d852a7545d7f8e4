"""Triton's compiled kernels cached by kcached, through its Redis door (docs/torch-compile.md).

    TRITON_CACHE_MANAGER=triton.runtime.cache:RemoteCacheManager
    TRITON_REMOTE_CACHE_BACKEND=kcache.triton:Backend
    KCACHE_REDIS_ADDR=127.0.0.1:6390          # kcached --redis-listen (or unix:/path)

(`kcache env --server ... --redis ADDR` prints these lines.) Each file of a kernel's group is
the value of `triton:<cache key>:<file name>`; a group's files come back in one MGET. The door
failing only costs a compile: a get answers nothing and a put is dropped, with one warning per
process. Pure Python: needs neither redis-py nor libkcache.

Each connection tells the door this process's CUDA driver (`KCACHE.DRIVER`, from libcuda's
cuDriverGetVersion, or $KCACHE_DRIVER_VERSION when set), so that a cubin built by a newer
toolkit than the driver loads comes back as a miss: Triton then compiles it here.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
import warnings
import weakref
from typing import BinaryIO, Dict, List, Optional, Tuple, Union

try:  # Triton checks that the backend derives from a class of this name.
    from triton.runtime.cache import RemoteCacheBackend
except ImportError:  # pragma: no cover - the backend is usable (and tested) without Triton
    class RemoteCacheBackend:  # type: ignore[no-redef]
        def __init__(self, key: str) -> None:
            pass

ADDRESS_ENV = "KCACHE_REDIS_ADDR"
DRIVER_ENV = "KCACHE_DRIVER_VERSION"
NAMESPACE = "triton"
_TIMEOUT_SECONDS = 10.0

Reply = Union[None, int, bytes, str, List["Reply"]]


class DoorError(Exception):
    """The door answered -ERR (a refusal), or the connection failed."""


class _Connection:
    """One RESP2 connection to the door: commands out, replies in."""

    def __init__(self, address: str) -> None:
        if address.startswith("unix:"):
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: Union[str, tuple] = address[len("unix:"):]
        else:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise DoorError(f"{ADDRESS_ENV}={address}: give HOST:PORT or unix:/PATH")
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = (host, int(port))
        self._sock.settimeout(_TIMEOUT_SECONDS)
        try:
            self._sock.connect(target)
        except OSError as e:
            self._sock.close()
            raise DoorError(f"cannot reach kcached's Redis door at {address}: {e}") from e
        self._in = self._sock.makefile("rb")
        # Closes the socket when the connection is dropped (its thread ended) or at exit.
        self._closer = weakref.finalize(self, _close_all, self._in, self._sock)

    def call(self, *args: Union[str, bytes]) -> Reply:
        frame = [b"*%d\r\n" % len(args)]
        for arg in args:
            data = arg.encode() if isinstance(arg, str) else arg
            frame.append(b"$%d\r\n%s\r\n" % (len(data), data))
        try:
            self._sock.sendall(b"".join(frame))
            return self._reply()
        except OSError as e:
            raise DoorError(f"kcached's Redis door: {e}") from e

    def _reply(self) -> Reply:
        line = self._in.readline()
        if not line.endswith(b"\r\n"):
            raise DoorError("kcached's Redis door closed the connection")
        kind, body = line[:1], line[1:-2]
        if kind == b"+":
            return body.decode()
        if kind == b"-":
            raise DoorError(body.decode(errors="replace"))
        if kind == b":":
            return int(body)
        if kind == b"$":
            size = int(body)
            if size < 0:
                return None
            data = self._in.read(size + 2)
            if len(data) != size + 2:
                raise DoorError("kcached's Redis door closed the connection mid-reply")
            return data[:-2]
        if kind == b"*":
            count = int(body)
            return None if count < 0 else [self._reply() for _ in range(count)]
        raise DoorError(f"unexpected reply from kcached's Redis door: {line[:40]!r}")

    def close(self) -> None:
        self._closer()


def _close_all(reader: BinaryIO, sock: socket.socket) -> None:
    reader.close()
    sock.close()


_libcuda_driver: Optional[int] = None
_libcuda_read = False


def driver_version() -> Optional[int]:
    """The CUDA driver version to tell the door (e.g. 12090): $KCACHE_DRIVER_VERSION when set
    (0 tells nothing), else cuDriverGetVersion from libcuda.so.1; None when neither gives one."""
    global _libcuda_driver, _libcuda_read
    told = os.environ.get(DRIVER_ENV, "").strip()
    if told:
        if not told.isdigit():
            warnings.warn(f"kcache.triton: {DRIVER_ENV}={told!r} is not a number like 12090: "
                          "the driver is not told", RuntimeWarning, stacklevel=2)
            return None
        return int(told) or None
    if not _libcuda_read:
        _libcuda_read = True
        try:
            version = ctypes.c_int(0)
            if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
                _libcuda_driver = version.value or None
        except (OSError, AttributeError):
            pass  # no driver here: nothing to tell
    return _libcuda_driver


class _Door:
    """A connection per thread, made again after a failure; each tells `driver` first."""

    def __init__(self, address: str, driver: Optional[int]) -> None:
        self.address = address
        self.driver = driver
        self._local = threading.local()
        self._warned = False

    def _connect(self) -> _Connection:
        connection = _Connection(self.address)
        if self.driver is not None:
            try:
                connection.call("KCACHE.DRIVER", str(self.driver))
            except DoorError as e:
                if "kcached's Redis door" in str(e):
                    connection.close()
                    raise
                # A kcached without KCACHE.DRIVER (older): served unchecked, as before.
        return connection

    def call(self, *args: Union[str, bytes]) -> Reply:
        connection: Optional[_Connection] = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._connect()
        try:
            return connection.call(*args)
        except DoorError as e:
            if "kcached's Redis door" in str(e):  # the connection, not a refusal: drop it
                connection.close()
                self._local.connection = None
            raise

    def warn_once(self, what: str, error: Exception) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"kcache.triton: {what} failed, Triton compiles instead: {error}",
                          RuntimeWarning, stacklevel=3)


_doors: Dict[Tuple[str, Optional[int]], _Door] = {}
_doors_lock = threading.Lock()


def _door(address: str, driver: Optional[int]) -> _Door:
    with _doors_lock:
        if (address, driver) not in _doors:
            _doors[(address, driver)] = _Door(address, driver)
        return _doors[(address, driver)]


class Backend(RemoteCacheBackend):
    """Triton's RemoteCacheBackend over kcached's Redis door ($KCACHE_REDIS_ADDR)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        address = os.environ.get(ADDRESS_ENV, "")
        if not address:
            raise RuntimeError(f"kcache.triton.Backend needs {ADDRESS_ENV} (kcached's "
                               "--redis-listen address); `kcache env --redis` sets it")
        self._door = _door(address, driver_version())
        self._prefix = f"{NAMESPACE}:{key}:"

    def get(self, filenames: List[str]) -> Dict[str, bytes]:
        """Every file asked for, or none: Triton asks for one file or for a kernel's whole group,
        and Triton 3.6's RemoteCacheManager.get_group hands on a partial group as found (later
        releases treat it as a miss), so a group missing its cubin (evicted, or refused for this
        driver) comes back empty and Triton compiles the kernel."""
        if not filenames:
            return {}
        try:
            values = self._door.call("MGET", *[self._prefix + name for name in filenames])
        except DoorError as e:
            self._door.warn_once("a lookup", e)
            return {}
        assert isinstance(values, list)
        if not all(isinstance(value, bytes) for value in values):
            return {}
        return dict(zip(filenames, values))

    def put(self, filename: str, data: bytes) -> None:
        try:
            self._door.call("SET", self._prefix + filename, data)
        except DoorError as e:
            self._door.warn_once("a store", e)
