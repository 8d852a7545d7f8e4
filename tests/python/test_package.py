"""`pip wheel client/python` (scikit-build-core, pinned in requirements/test.txt, from this
environment: --no-build-isolation) builds a wheel holding the pure-Python package and the
libkcache.so built from this repository; installed into a fresh virtual environment it works
on its own (its own library, no PYTHONPATH, no KCACHE_LIBRARY) against a real daemon."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import MANIFEST, REPO

SMOKE = """
import os, sys, kcache
assert os.path.dirname(kcache.__file__) in kcache.library_path(), kcache.library_path()
assert kcache.library_path().startswith(sys.prefix), kcache.library_path()
kernels = {k.name: k for k in kcache.load_manifest(sys.argv[1])}
with kcache.Client(sys.argv[2], local_compile_fallback=False) as client:
    results = client.resolve_many([kernels["axpy"], kernels["scale"]], "8.9")
for k in results:
    assert isinstance(k, kcache.Kernel), k
    assert (k.kind, k.target) == ("cubin", "sm_89") and bytes(k)[:4] == b"\\x7fELF", k
print("ok", kcache.library_version(), [k.served_from for k in results])
"""


def test_wheel_builds_installs_and_works_alone(daemon, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KCACHE_LIBRARY", "PYTHONPATH")}
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
         "--disable-pip-version-check", "-w", str(wheels), str(REPO / "client" / "python")],
        capture_output=True, text=True, timeout=1700, env=env)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    (wheel,) = wheels.glob("kcache-*.whl")
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl"), wheel.name
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in ("kcache/__init__.py", "kcache/_native.py", "kcache/py.typed",
                     "kcache/libkcache.so"):
        assert expected in names, sorted(names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--target", site, str(wheel)],
        capture_output=True, text=True, timeout=300, env=env)
    assert install.returncode == 0, install.stdout + install.stderr
    smoke = subprocess.run([str(python), "-c", SMOKE, str(MANIFEST), daemon.address],
                           capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert smoke.stdout.startswith("ok ")
