"""Default Python clients wait for kernels kcached is compiling (docs/client.md, "Deadlines"):
the daemon keeps each call alive with progress messages, so a 2 s deadline bounds silence, not
the compile. Compiles are made slow by the fault-injecting compile worker
(KCACHE_TEST_SLEEP_MS). A client's on_progress hears where its compile is."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest

import kcache
from conftest import BUILD, MANIFEST
from kcached_process import Daemon

DEVICE = kcache.Device(8, 9, 13000)
FAULTY_WORKER = BUILD / "engine" / "workers" / "kcache-compile-worker-faulty"


@pytest.fixture()
def slow_daemon(kcached: str, warm_store: Path, tmp_path: Path) -> Iterator[Daemon]:
    """A kcached with two compile workers that sleep on KCACHE_TEST_SLEEP_MS:<n>."""
    if not os.access(FAULTY_WORKER, os.X_OK):
        pytest.skip(f"{FAULTY_WORKER} is not built (KCACHE_BUILD_TESTS)")
    store = tmp_path / "store"
    shutil.copytree(warm_store, store)
    d = Daemon(kcached, store, tmp_path,
               ["--compile-worker", str(FAULTY_WORKER), "--compile-workers", "2",
                "--compile-timeout-seconds", "60"])
    d.start()
    if "serve-only" in d.log():
        d.stop()
        pytest.skip("no CUDA toolkit to compile with")
    yield d
    d.stop()


def variant(tag: str, sleep_ms: int = 0) -> kcache.KernelSource:
    """axpy made a kernel of its own by `tag`, whose compile first sleeps `sleep_ms`."""
    axpy = {k.name: k for k in kcache.load_manifest(MANIFEST)}["axpy"]
    marker = f" KCACHE_TEST_SLEEP_MS:{sleep_ms}" if sleep_ms else ""
    return dataclasses.replace(axpy, name=f"axpy_{tag}", source=f"// {tag}{marker}\n{axpy.source}")


def test_a_default_client_is_served_a_five_second_compile(slow_daemon: Daemon) -> None:
    client = kcache.Client(slow_daemon.address)  # every default: a 2 s deadline
    start = time.monotonic()
    k = client.resolve(variant("five", 5000), DEVICE)
    print(f"a 5000 ms compile with a default Python client: served in "
          f"{time.monotonic() - start:.2f} s")
    assert k.served_from == "daemon:compile"


def test_small_kernels_are_served_while_two_bombs_hold_every_worker(slow_daemon: Daemon) -> None:
    bomber = kcache.Client(slow_daemon.address, client_name="bomber",
                           local_compile_fallback=False, breaker_failures=0)
    bombs = [threading.Thread(target=lambda i=i: _quietly(bomber, variant(f"bomb{i}", 60000)),
                              daemon=True) for i in range(2)]
    for b in bombs:
        b.start()
    time.sleep(1.0)  # both workers taken
    results: List[object] = [None] * 3

    def small(i: int) -> None:
        try:
            results[i] = kcache.Client(slow_daemon.address).resolve(variant(f"small{i}"), DEVICE)
        except kcache.Error as e:
            results[i] = e

    smalls = [threading.Thread(target=small, args=(i,)) for i in range(3)]
    start = time.monotonic()
    for t in smalls:
        t.start()
    for t in smalls:
        t.join(120)
    print(f"three small kernels behind two bombs: served in {time.monotonic() - start:.2f} s")
    for r in results:
        assert isinstance(r, kcache.Kernel), r
        assert r.served_from.startswith("daemon:"), r.served_from
    slow_daemon.kill()  # the bombs' calls end (their workers die with the daemon)
    for b in bombs:
        b.join(30)


def _quietly(client: kcache.Client, source: kcache.KernelSource) -> None:
    try:
        client.resolve(source, DEVICE)
    except kcache.Error:
        pass


def test_on_progress_sees_the_kernel_compiling(slow_daemon: Daemon) -> None:
    seen: List[kcache.Progress] = []
    client = kcache.Client(slow_daemon.address, on_progress=seen.append)
    k = client.resolve(variant("progress", 1500), DEVICE)
    assert k.served_from == "daemon:compile"
    assert any(p.stage == "compiling" and p.index == 0 for p in seen), seen
