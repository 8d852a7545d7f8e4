"""examples/python/worker.py: a worker's start-up in Python, against the test daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import kcache
from conftest import MANIFEST, REPO

WORKER = REPO / "examples" / "python" / "worker.py"
GPUS = kcache.detect_gpus()


def run_worker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WORKER), "--manifest", str(MANIFEST), *args],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))


def test_worker_gets_every_kernel_from_the_daemon(daemon) -> None:
    run = run_worker("--device", "8.9", "--server", daemon.address, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["device"] == "8.9" and report["failed"] == 0
    names = [k["name"] for k in report["kernels"]]
    assert names == ["axpy", "scale"]
    for k in report["kernels"]:
        # Warmed by `kcache warm`: a stored hit (the manifest is read as warm reads it).
        assert k["outcome"] == "served" and k["served_from"] in ("daemon:local_store",
                                                                 "daemon:memory"), k
        assert (k["kind"], k["target"]) == ("cubin", "sm_89") and k["bytes"] > 0
    assert report["total_micros"] > 0


def test_worker_text_report_and_skips(daemon) -> None:
    run = run_worker("--device", "7.0", "--server", daemon.address)  # below both kernels' 7.5
    assert run.returncode == 0, run.stdout + run.stderr
    assert "axpy" in run.stdout and "skipped: its arch range 7.5.. excludes 7.0" in run.stdout
    assert "total 2 kernels" in run.stdout and "2 skipped, 0 failed" in run.stdout


def test_worker_no_cache_compiles_in_process() -> None:
    run = run_worker("--device", "8.9", "--no-cache", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["mode"].startswith("NVRTC in this process")
    assert [k["served_from"] for k in report["kernels"]] == ["local_compile", "local_compile"]


def test_worker_bad_input() -> None:
    assert run_worker("--device", "eight").returncode == 2
    bad = subprocess.run([sys.executable, str(WORKER), "--manifest", "/nonexistent.yaml",
                          "--device", "8.9"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "/nonexistent.yaml" in bad.stderr


def test_worker_pretends_a_node_with_repeated_devices(daemon) -> None:
    run = run_worker("--device", "7.5", "--device", "8.6", "--device", "7.5", "--server",
                     daemon.address, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["distinct_devices"] == 2 and report["failed"] == 0
    assert [g["device"] for g in report["gpus"]] == ["7.5", "8.6", "7.5"]
    for gpu in report["gpus"]:
        sass = "sm_" + gpu["device"].replace(".", "")
        assert [k["target"] for k in gpu["kernels"]] == [sass, sass], gpu
        assert gpu["loaded"] == (gpu["ordinal"] < len(GPUS)
                                 and str(GPUS[gpu["ordinal"]].device) == gpu["device"])
    text = run_worker("--device", "7.5", "--device", "8.6", "--server", daemon.address)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "node of 2 GPUs, 2 distinct SMs" in text.stdout
    assert "GPU 1: device 8.6" in text.stdout and "total 2 kernels x 2 GPUs" in text.stdout
