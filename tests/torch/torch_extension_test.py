"""torch.utils.cpp_extension.load() through kcache's compiler launchers, end to end.

The image build records the extension (tests/torch/ext) with `kcache run --store`; then a pod
(a fresh TORCH_EXTENSIONS_DIR at another path, a new kcached over that store baked) builds it
with `kcache run --server` and an empty state directory (no digest memo: a new pod's): every
compile step and the link must hit, the module must import and its CPU function work. Exits
125 (skipped) when torch is not importable.

Usage: torch_extension_test.py KCACHE KCACHED
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXT = Path(__file__).resolve().parent / "ext"

LOAD = f"""
import torch, torch.utils.cpp_extension as ce
m = ce.load(name="kcache_ext", sources=["{EXT}/kcache_ext.cpp", "{EXT}/kcache_ext_kernel.cu"],
            verbose=True)
out = m.scale_cpu(torch.arange(3, dtype=torch.float32), 2.0)
assert out.tolist() == [1.0, 3.0, 5.0], out
print("EXTENSION-OK")
"""


def build(kcache: str, route: list[str], extensions_dir: Path, env_extra: dict) -> str:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(extensions_dir), KCACHE_LOG="1",
               MAX_JOBS="2", **env_extra)
    result = subprocess.run([kcache, "run", *route, "--arch", "8.9", "--", sys.executable, "-c",
                             LOAD], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=1200)
    if result.returncode != 0 or "EXTENSION-OK" not in result.stdout:
        sys.exit(f"load() failed (exit {result.returncode}):\n{result.stdout}")
    return result.stdout


def count(output: str, word: str) -> int:
    return sum(1 for line in output.splitlines() if line.startswith(f"kcache: {word} "))


def main() -> int:
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: torch is not importable ({e})")
        return 125
    kcache, kcached = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="kcache-torch-") as tmp_name:
        tmp = Path(tmp_name)
        state = {"KCACHE_STATE_DIR": str(tmp / "state")}
        image = build(kcache, ["--store", str(tmp / "baked"), "--shims", str(tmp / "shims")],
                      tmp / "image" / "torch_extensions", state)
        misses = count(image, "miss")
        if misses != 3 or count(image, "hit") != 0:  # the .cpp, the .cu and the link
            sys.exit(f"image build: expected 3 misses and no hit, got:\n{image}")
        socket = tmp / "kcache.sock"
        with open(tmp / "kcached.log", "wb") as log:
            daemon = subprocess.Popen([kcached, "--store", str(tmp / "pod-store"), "--baked",
                                       str(tmp / "baked"), "--no-toolkit", "--listen",
                                       f"unix://{socket}"], stdout=log, stderr=subprocess.STDOUT)
        try:
            give_up = time.monotonic() + 30
            while not socket.exists() and time.monotonic() < give_up:
                time.sleep(0.05)
            start = time.monotonic()
            pod = build(kcache, ["--server", f"unix://{socket}", "--shims", str(tmp / "shims")],
                        tmp / "pod" / "home" / "other" / "torch_extensions",
                        {"KCACHE_STATE_DIR": str(tmp / "pod-state")})
            seconds = time.monotonic() - start
        finally:
            daemon.terminate()
            daemon.wait(30)
        if count(pod, "hit") != misses or count(pod, "miss") != 0:
            sys.exit(f"pod build: expected {misses} hits and no miss, got:\n{pod}")
        print(f"ok: image build recorded {misses} commands; the pod's load() hit all of them "
              f"and took {seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
