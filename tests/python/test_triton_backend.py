"""kcache.triton.Backend, Triton's remote cache over kcached's Redis door: a group of files put
by one process's RemoteCacheManager comes back whole to a fresh one (an empty local Triton
cache), in one MGET; a door that is away or refuses costs a compile, never an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from kcache import triton as kcache_triton


@pytest.fixture
def door_env(redis_door: int, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("KCACHE_REDIS_ADDR", f"127.0.0.1:{redis_door}")
    return redis_door


def test_get_and_put_of_a_group_in_one_call(door_env: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    backend = kcache_triton.Backend("key-group")
    files = {"kernel.cubin": bytes(range(256)) * 40, "kernel.json": b'{"name": "k"}',
             "kernel.ptx": b".version 8.0\n"}
    assert backend.get(list(files)) == {}
    for name, data in files.items():
        backend.put(name, data)
    commands = []
    call = kcache_triton._Door.call
    monkeypatch.setattr(kcache_triton._Door, "call",
                        lambda door, *args: commands.append(args[0]) or call(door, *args))
    assert kcache_triton.Backend("key-group").get([*files, "absent.bin"]) == files
    assert commands == ["MGET"]
    with redis.Redis(port=door_env) as r:
        assert r.get("triton:key-group:kernel.json") == b'{"name": "k"}'
    assert kcache_triton.Backend("other-key").get(["kernel.json"]) == {}


def test_triton_remote_cache_manager_round_trip(door_env: int, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cache = pytest.importorskip("triton.runtime.cache")
    monkeypatch.setenv("TRITON_REMOTE_CACHE_BACKEND", "kcache.triton:Backend")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "pod1"))
    first = cache.RemoteCacheManager("abc123")
    paths = {name: first.put(data, name) for name, data in
             [("k.cubin", b"\x7fELF-cubin"), ("k.json", b"{}")]}
    first.put_group("k.json", paths)
    # A new pod: its local Triton cache is empty; the group comes from kcached.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "pod2"))
    second = cache.RemoteCacheManager("abc123")
    group = second.get_group("k.json")
    assert group is not None and set(group) == {"k.cubin", "k.json"}
    assert Path(group["k.cubin"]).read_bytes() == b"\x7fELF-cubin"
    assert str(tmp_path / "pod2") in group["k.cubin"]


def test_a_door_away_or_refusing_costs_a_compile(door_env: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    backend = kcache_triton.Backend("big")
    with pytest.warns(RuntimeWarning, match="failed"):
        backend.put("huge.bin", b"x" * ((1 << 20) + 1))  # over --redis-max-value-bytes
    assert backend.get(["huge.bin"]) == {}
    monkeypatch.setenv("KCACHE_REDIS_ADDR", "127.0.0.1:1")  # nothing listens there
    away = kcache_triton.Backend("k")
    with pytest.warns(RuntimeWarning, match="cannot reach"):
        assert away.get(["a"]) == {}
    away.put("a", b"v")  # warned once already: silent


def test_needs_the_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KCACHE_REDIS_ADDR", raising=False)
    with pytest.raises(RuntimeError, match="KCACHE_REDIS_ADDR"):
        kcache_triton.Backend("k")
