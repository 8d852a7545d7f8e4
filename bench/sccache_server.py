"""An sccache server of a bench's own, for bench/launcher and bench/torch_ext: on a free port,
and stopped when the bench is done. A server left running outlives its bench's temporary
SCCACHE_DIR, and a later bench on the same port is served by it, from a cache that is gone (every
compile a miss)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from typing import Iterator


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def own_server(sccache: str, env: dict) -> Iterator[dict]:
    """`env` with SCCACHE_SERVER_PORT set to a free port (sccache starts its server there on
    first use); the server is stopped on leaving, whatever happened."""
    env = {**env, "SCCACHE_SERVER_PORT": str(free_port())}
    try:
        yield env
    finally:
        subprocess.run([sccache, "--stop-server"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
