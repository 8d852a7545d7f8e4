"""kcached's Redis door through redis-py, the client Inductor's remote caches use, in RESP2 and
RESP3: the handshake redis-py sends, every command the caches use, binary values, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import free_port
from kcached_process import Daemon

redis = pytest.importorskip("redis")


@pytest.mark.parametrize("protocol", [2, 3])
def test_commands_the_caches_use(redis_door: int, protocol: int) -> None:
    r = redis.Redis(port=redis_door, protocol=protocol)
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


def test_resp3_hello_reply(redis_door: int) -> None:
    r = redis.Redis(port=redis_door, protocol=3)
    hello = r.execute_command("HELLO", 3)
    assert hello[b"proto"] == 3 and hello[b"server"] == b"kcache"
    r.close()


def test_refusals_are_errors_and_the_connection_stays(redis_door: int) -> None:
    r = redis.Redis(port=redis_door, single_connection_client=True)
    with pytest.raises(redis.ResponseError, match="outside the namespaces"):
        r.set("mine:a", b"v")
    with pytest.raises(redis.ResponseError, match="--redis-value-max-bytes"):
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
        with redis.Redis(port=port) as r:
            r.set("triton:kept", b"\x00bytes")
        d.stop()
        d.start()
        with redis.Redis(port=port) as r:
            assert r.get("triton:kept") == b"\x00bytes"
    finally:
        d.stop()


def test_a_unix_socket_door_through_the_url_inductor_reads(kcached: str, tmp_path: Path) -> None:
    """Inductor opens TORCHINDUCTOR_REDIS_URL with redis.Redis.from_url; `kcache env --redis`
    gives a unix-socket door as unix:///PATH, which redis-py reaches."""
    socket_path = tmp_path / "redis.sock"
    d = Daemon(kcached, tmp_path / "store", tmp_path,
               ["--no-toolkit", "--redis-listen", f"unix://{socket_path}"])
    d.start()
    try:
        assert oct(socket_path.stat().st_mode & 0o777) == "0o600"
        with redis.Redis.from_url(f"unix://{socket_path}") as r:
            assert r.set("pt2:over-a-socket", b"graph") is True
            assert r.get("pt2:over-a-socket") == b"graph"
    finally:
        d.stop()
