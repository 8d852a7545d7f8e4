"""kcached's Redis door through redis-py, the client Inductor's remote caches use, in RESP2 and
RESP3: the handshake redis-py sends, every command the caches use, binary values, refusals."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Iterator

import pytest

from kcached_process import Daemon

redis = pytest.importorskip("redis")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def door(kcached: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    directory = tmp_path_factory.mktemp("door")
    port = free_port()
    d = Daemon(kcached, directory / "store", directory,
               ["--no-toolkit", "--redis-listen", f"127.0.0.1:{port}",
                "--redis-max-value-bytes", "1MiB"])
    d.start()
    yield port
    d.stop()


@pytest.mark.parametrize("protocol", [2, 3])
def test_commands_the_caches_use(door: int, protocol: int) -> None:
    r = redis.Redis(port=door, protocol=protocol)
    assert r.ping()
    value = bytes(range(256)) * 100
    key = f"pt2:fx-graph-v{protocol}::abc\x00\xff:c1"
    assert r.get(key) is None
    assert r.set(key, value) is True
    assert r.get(key) == value
    assert r.set(key, b"other", nx=True) is None
    assert r.set(key, b"new", xx=True, ex=60) is True
    assert r.mget([key, f"triton:none{protocol}"]) == [b"new", None]
    assert r.exists(key, f"triton:none{protocol}") == 1
    assert r.delete(key) == 1
    assert r.get(key) is None
    assert r.select(0)
    assert "kcache_version" in r.info()
    r.close()


def test_resp3_hello_reply(door: int) -> None:
    r = redis.Redis(port=door, protocol=3)
    hello = r.execute_command("HELLO", 3)
    assert hello[b"proto"] == 3 and hello[b"server"] == b"kcache"
    r.close()


def test_refusals_are_errors_and_the_connection_stays(door: int) -> None:
    r = redis.Redis(port=door, single_connection_client=True)
    with pytest.raises(redis.ResponseError, match="outside the namespaces"):
        r.set("mine:a", b"v")
    with pytest.raises(redis.ResponseError, match="--redis-max-value-bytes"):
        r.set("pt2:big", b"x" * ((1 << 20) + 1))
    with pytest.raises(redis.ResponseError, match="unknown command"):
        r.execute_command("FLUSHALL")
    with pytest.raises(redis.ResponseError, match="database 0 only"):
        r.select(2)
    assert r.exists("pt2:big") == 0
    assert r.ping()
    r.close()


def test_values_survive_a_restart(kcached: str, tmp_path: Path) -> None:
    port = free_port()
    d = Daemon(kcached, tmp_path / "store", tmp_path,
               ["--no-toolkit", "--redis-listen", f"127.0.0.1:{port}"])
    d.start()
    try:
        redis.Redis(port=port).set("triton:kept", b"\x00bytes")
        d.stop()
        d.start()
        assert redis.Redis(port=port).get("triton:kept") == b"\x00bytes"
    finally:
        d.stop()
