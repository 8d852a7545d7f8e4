"""A kcached process on a temp unix socket, for tests/python and bench/python_bench.py."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import List, Optional

import kcache


class Daemon:
    """A kcached process on `<dir>/kcache.sock` over the store `store`."""

    def __init__(self, kcached: str, store: Path, directory: Path,
                 extra: Optional[List[str]] = None) -> None:
        self.kcached = kcached
        self.store = store
        self.socket = directory / "kcache.sock"
        self.log_path = directory / "kcached.log"
        self.address = f"unix://{self.socket}"
        self.extra = extra or []
        self.process: Optional[subprocess.Popen[bytes]] = None

    def start(self, timeout: float = 30.0) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.kcached, "--store", str(self.store), "--listen", self.address, *self.extra],
                stdout=log, stderr=subprocess.STDOUT)
        give_up = time.monotonic() + timeout
        client = kcache.Client(self.address, deadline=0.5, local_compile_fallback=False,
                               breaker_failures=0)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"kcached exited with {self.process.returncode}:\n{self.log()}")
            try:
                client.stat()
                client.close()
                return
            except kcache.Error:
                if time.monotonic() > give_up:
                    self.stop()
                    raise RuntimeError(f"kcached did not answer within {timeout} s:\n{self.log()}")
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash: the socket stays behind, nothing answers on it."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""
