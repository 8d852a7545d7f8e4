"""kcache.triton.Backend, Triton's remote cache over kcached's Redis door: a group of files put
by one process's RemoteCacheManager comes back whole to a fresh one (an empty local Triton
cache), in one MGET; a door that is away or refuses costs a compile, never an error; a cubin the
told driver cannot load is not served; connections are closed at exit."""

from __future__ import annotations

import ctypes
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from kcache import triton as kcache_triton


@pytest.fixture
def door_env(redis_door: int, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("KCACHE_REDIS_ADDR", f"127.0.0.1:{redis_door}")
    monkeypatch.delenv("KCACHE_DRIVER_VERSION", raising=False)
    return redis_door


SAXPY = b"""extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}"""


def nvrtc_cubin(major: int) -> bytes:
    """saxpy for sm_90 compiled by the venv's NVRTC wheel of CUDA `major` (12: 12.9, 13: 13.x;
    requirements/test.txt pins both)."""
    found = [path for directory in site.getsitepackages()
             for path in Path(directory).glob(f"nvidia/*/lib/libnvrtc.so.{major}")]
    assert found, f"no libnvrtc.so.{major} wheel in {sys.prefix}: run scripts/install-deps.sh"
    nvrtc = ctypes.CDLL(str(found[0]))
    program = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(program), SAXPY, b"saxpy.cu", 0, None, None) == 0
    options = (ctypes.c_char_p * 1)(b"-arch=sm_90")
    assert nvrtc.nvrtcCompileProgram(program, 1, options) == 0
    size = ctypes.c_size_t()
    assert nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(size)) == 0
    cubin = ctypes.create_string_buffer(size.value)
    assert nvrtc.nvrtcGetCUBIN(program, cubin) == 0
    nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    return cubin.raw


def put_group(key: str, cubin: bytes) -> dict:
    files = {"saxpy.cubin": cubin, "saxpy.json": b'{"name": "saxpy"}'}
    for name, data in files.items():
        kcache_triton.Backend(key).put(name, data)
    return files


def test_a_cubin_newer_than_the_told_driver_is_not_served(door_env: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cuda13 = put_group("drv-13", nvrtc_cubin(13))
    cuda129 = put_group("drv-129", nvrtc_cubin(12))
    monkeypatch.setenv("KCACHE_DRIVER_VERSION", "12090")
    assert kcache_triton.Backend("drv-13").get(list(cuda13)) == {}  # the group without its cubin
    assert kcache_triton.Backend("drv-13").get(["saxpy.json"]) == {"saxpy.json": cuda13["saxpy.json"]}
    assert kcache_triton.Backend("drv-129").get(list(cuda129)) == cuda129
    monkeypatch.setenv("KCACHE_DRIVER_VERSION", "13000")
    assert kcache_triton.Backend("drv-13").get(list(cuda13)) == cuda13
    assert kcache_triton.Backend("drv-129").get(list(cuda129)) == cuda129
    monkeypatch.setenv("KCACHE_DRIVER_VERSION", "0")  # tells nothing: served unchecked
    assert kcache_triton.Backend("drv-13").get(list(cuda13)) == cuda13


def test_triton_compiles_a_group_whose_cubin_the_driver_cannot_load(
        door_env: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = pytest.importorskip("triton.runtime.cache")
    monkeypatch.setenv("TRITON_REMOTE_CACHE_BACKEND", "kcache.triton:Backend")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "pod1"))
    first = cache.RemoteCacheManager("drv-triton")
    paths = {name: first.put(data, name) for name, data in
             [("k.cubin", nvrtc_cubin(13)), ("k.json", b"{}")]}
    first.put_group("k.json", paths)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "pod2"))
    monkeypatch.setenv("KCACHE_DRIVER_VERSION", "12090")
    # A miss to Triton's compiler: None (Triton 3.9) or {} (3.6); never a group without its cubin,
    # which Triton 3.6 would take for a hit ("metadata_group.get(metadata_filename)").
    assert not cache.RemoteCacheManager("drv-triton").get_group("k.json")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "pod3"))
    monkeypatch.setenv("KCACHE_DRIVER_VERSION", "13000")
    assert set(cache.RemoteCacheManager("drv-triton").get_group("k.json")) == {"k.cubin", "k.json"}


def test_a_bad_driver_override_is_warned_and_tells_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KCACHE_DRIVER_VERSION", "12.9")
    with pytest.warns(RuntimeWarning, match="not a number like 12090"):
        assert kcache_triton.driver_version() is None
    monkeypatch.setenv("KCACHE_DRIVER_VERSION", "12090")
    assert kcache_triton.driver_version() == 12090


def test_connections_are_closed_when_their_thread_ends_and_at_exit(door_env: int) -> None:
    script = """
import threading
from kcache import triton
def get():
    triton.Backend("closed").get(["a"])
worker = threading.Thread(target=get)
worker.start()
worker.join()
get()
"""
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", script],
                          env=os.environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "unclosed" not in done.stderr and "ResourceWarning" not in done.stderr, done.stderr


def test_a_group_missing_a_file_comes_back_empty(door_env: int) -> None:
    """Triton 3.6's get_group hands on whatever get() returns: a group without its cubin (evicted,
    or never put) must come back as nothing, so that Triton compiles instead of failing."""
    files = put_group("partial", b"\x7fELF not a real cubin")
    with redis.Redis(port=door_env) as r:
        r.delete("triton:partial:saxpy.cubin")
    assert kcache_triton.Backend("partial").get(list(files)) == {}
    assert kcache_triton.Backend("partial").get(["saxpy.json"]) == {"saxpy.json": files["saxpy.json"]}


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
    assert kcache_triton.Backend("key-group").get(list(files)) == files
    assert kcache_triton.Backend("key-group").get([*files, "absent.bin"]) == {}
    assert commands == ["MGET", "MGET"]
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
        backend.put("huge.bin", b"x" * ((1 << 20) + 1))  # over --redis-value-max-bytes
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
