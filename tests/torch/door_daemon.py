"""A kcached with its Redis door on a loopback port or a unix socket, for the torch.compile test and
bench/torch_compile: started over a store in a temporary folder, serving once PING is answered."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    """A loopback port free now, picked at random below Linux's ephemeral range (32768 and up),
    where a free port may be handed to another test's outgoing connection before the server it
    was picked for binds it: tests/testutil/http.h's FreePort range."""
    import random
    for _ in range(200):
        port = random.randrange(27000, 32700)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free loopback port in 27000-32699")


def start_kcached(kcached: str, tmp: Path, port: int | None = None) -> subprocess.Popen:
    """kcached over tmp/store, its main socket at unix://tmp/kcache.sock and its door at
    127.0.0.1:port, or with no port on the unix socket tmp/redis.sock (the safe choice: only
    its user may connect), logging to tmp/kcached.log. Exits the process when the door never
    answers."""
    door = f"127.0.0.1:{port}" if port is not None else f"unix://{tmp}/redis.sock"
    log = open(tmp / "kcached.log", "wb")
    process = subprocess.Popen([kcached, "--store", str(tmp / "store"), "--listen",
                                f"unix://{tmp}/kcache.sock", "--no-toolkit", "--redis-listen",
                                door], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            if port is not None:
                s = socket.create_connection(("127.0.0.1", port), timeout=1)
            else:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(1)
                s.connect(str(tmp / "redis.sock"))
            with s:
                s.sendall(b"PING\r\n")
                if s.recv(16) == b"+PONG\r\n":
                    return process
        except OSError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    sys.exit("kcached did not serve its Redis door:\n" + (tmp / "kcached.log").read_text())
