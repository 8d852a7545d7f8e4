"""Fixtures of tests/python: a real kcached on a temp unix socket, over a store that the kcache
command line warmed (`kcache warm --store`) with testdata/manifest.yaml for 8.9.

ctest runs these (tests/python/CMakeLists.txt) with the binaries in the environment:
  KCACHED        the kcached binary             KCACHE_CLI   the kcache command line
  KCACHE_LIBRARY the libkcache.so to load       PYTHONPATH   client/python/src
By hand, after a build (defaults are the build tree's):
  KCACHE_LIBRARY=build/client/lib/libkcache.so PYTHONPATH=client/python/src \\
    scripts/venv-python -m pytest tests/python
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

# free_port: a loopback port below the ephemeral range, one definition for the Python suites
# (tests/torch/door_daemon.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))
from door_daemon import free_port  # noqa: E402,F401  (test_redis_door.py takes it from here)

REPO = Path(__file__).resolve().parents[2]
TESTDATA = Path(__file__).resolve().parent / "testdata"
MANIFEST = TESTDATA / "manifest.yaml"
BUILD = Path(os.environ.get("KCACHE_BUILD_DIR", REPO / "build"))


def binary(env: str, default: Path) -> str:
    path = os.environ.get(env) or str(default)
    if not os.access(path, os.X_OK):
        pytest.exit(f"{path} is not an executable: build it, or set {env}", returncode=2)
    return path


os.environ.setdefault("KCACHE_LIBRARY", str(BUILD / "client" / "lib" / "libkcache.so"))

import kcache  # noqa: E402  (after KCACHE_LIBRARY is set)
from kcached_process import Daemon  # noqa: E402


@pytest.fixture(scope="session")
def kcached() -> str:
    return binary("KCACHED", BUILD / "daemon" / "kcached")


@pytest.fixture(scope="session")
def kcache_cli() -> str:
    return binary("KCACHE_CLI", BUILD / "client" / "cli" / "kcache")


@pytest.fixture(scope="session")
def session_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kcache-pytest-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def warm_store(kcache_cli: str, session_dir: Path) -> Path:
    """A store holding testdata/manifest.yaml's kernels for 8.9, warmed by the command line."""
    store = session_dir / "warm-store"
    run = subprocess.run([kcache_cli, "warm", str(MANIFEST), "--store", str(store),
                          "--arch", "8.9"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return store


@pytest.fixture(scope="session")
def daemon(kcached: str, warm_store: Path, session_dir: Path) -> Iterator[Daemon]:
    """A kcached over a copy of the warm store, for the whole session."""
    directory = session_dir / "daemon"
    directory.mkdir()
    store = directory / "store"
    shutil.copytree(warm_store, store)
    d = Daemon(kcached, store, directory)
    d.start()
    yield d
    d.stop()


@pytest.fixture()
def own_daemon(kcached: str, warm_store: Path, tmp_path: Path) -> Iterator[Daemon]:
    """A kcached of this test alone (it may kill it), over a copy of the warm store."""
    store = tmp_path / "store"
    shutil.copytree(warm_store, store)
    d = Daemon(kcached, store, tmp_path)
    d.start()
    yield d
    d.stop()


@pytest.fixture()
def client(daemon: Daemon) -> Iterator[kcache.Client]:
    c = kcache.Client(daemon.address, deadline=60.0, local_compile_fallback=False,
                      client_name="pytest")
    yield c
    c.close()


@pytest.fixture(scope="session")
def manifest_kernels() -> dict:
    return {k.name: k for k in kcache.load_manifest(MANIFEST)}


# -- GPU suites: exit 125 (ctest's "skipped") when every test skipped -----------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--exit-125-when-all-skipped", action="store_true",
                     help="exit 125 when tests were collected and every one skipped (no GPU)")


_outcomes: List[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _outcomes.append(report.outcome)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if (session.config.getoption("--exit-125-when-all-skipped") and exitstatus == 0
            and _outcomes and all(o == "skipped" for o in _outcomes)):
        session.exitstatus = 125


@pytest.fixture(scope="session")
def redis_door(kcached: str, session_dir: Path) -> Iterator[int]:
    """A kcached with its Redis door on a free loopback port (values up to 1 MiB): the port."""
    directory = session_dir / "redis-door"
    directory.mkdir()
    port = free_port()
    d = Daemon(kcached, directory / "store", directory,
               ["--no-toolkit", "--redis-listen", f"127.0.0.1:{port}",
                "--redis-value-max-bytes", "1MiB"])
    d.start()
    yield port
    d.stop()
