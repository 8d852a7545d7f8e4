#!/usr/bin/env python3
"""An example inference worker's start-up, in Python (examples/worker is the C++ one): find its
GPUs (every one the process sees, or the node --device pretends), get every kernel of a manifest
for each distinct SM in one call (kcache.resolve_for_gpus) from kcached, or with --no-cache
compile them in this process with NVRTC as workers do without a cache, load each GPU's own on
it (kcache.load: checked, then cuda.core, when installed), and report per GPU how long it took.

  examples/python/worker.py --manifest kernels/manifest.yaml --device 8.9 [--server ADDR]
  examples/python/worker.py --manifest kernels/manifest.yaml --device 7.5 --device 8.6
  examples/python/worker.py --manifest kernels/manifest.yaml --device 8.9 --no-cache

Exit codes (as examples/worker): 0 every kernel served (or skipped by its arch range), 1 some
failed, 2 bad input (manifest, device) or no GPU and no --device.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import kcache


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest", required=True, help="kernel manifest (docs/manifest.md)")
    p.add_argument("--server", help="kcached address (default $KCACHE_ADDRESS, else "
                                    "unix:///run/kcache/kcache.sock)")
    p.add_argument("--device", action="append", default=[],
                   help="resolve for this SM (e.g. 8.9) instead of the GPUs; repeat it to pretend "
                        "a node (GPU i is loaded when this machine's GPU i has that SM)")
    p.add_argument("--driver", type=int, default=0, help="with --device: the driver version")
    p.add_argument("--no-cache", action="store_true",
                   help="compile every kernel in this process with NVRTC (libkcache's local "
                        "compiler), as workers do without kcache")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.add_argument("--deadline-ms", type=int, default=2000, help="deadline of each daemon call")
    p.add_argument("--toolkit", help="CUDA toolkit for local compiles (default $CUDA_HOME, "
                                     "else /usr/local/cuda)")
    args = p.parse_args(argv)
    if args.no_cache and args.server:
        p.error("--no-cache excludes --server")
    return args


def choose_gpus(args: argparse.Namespace) -> Optional[Tuple[List[kcache.Gpu], List[bool]]]:
    """The node's GPUs and, for each, whether it is a real GPU here to load on."""
    detected = kcache.detect_gpus()
    if not args.device:
        if not detected:
            print("worker.py: no GPU to start on (pass --device 8.9, repeated for a node, to "
                  "resolve the kernels anyway)", file=sys.stderr)
            return None
        return detected, [True] * len(detected)
    devices = []
    for text in args.device:
        try:
            device = kcache.Device.parse(text, args.driver)
        except ValueError as e:
            print(f"worker.py: --device: {e}", file=sys.stderr)
            return None
        if device.driver_version == 0 and detected:
            device = kcache.Device(device.sm_major, device.sm_minor,
                                   detected[0].device.driver_version)
        devices.append(device)
    gpus = kcache.pretend_gpus(devices)
    same_sm = [g.ordinal < len(detected) and detected[g.ordinal].device.arch == g.device.arch
               for g in gpus]
    gpus = [kcache.Gpu(g.ordinal, g.device, detected[g.ordinal].name) if same else g
            for g, same in zip(gpus, same_sm)]
    return gpus, same_sm


def make_client(args: argparse.Namespace) -> "tuple[kcache.Client, str]":
    if args.no_cache:
        # libkcache's local compiler: a client whose daemon is never there. The first call finds
        # the socket absent (microseconds) and opens the circuit; every kernel is compiled here.
        absent = os.path.join(tempfile.gettempdir(), f"kcache-no-cache-{os.getpid()}.sock")
        client = kcache.Client(f"unix://{absent}", local_compile_fallback=True,
                               toolkit_root=args.toolkit, breaker_failures=1,
                               breaker_cooldown=3600.0, client_name="worker.py --no-cache")
        return client, "NVRTC in this process (--no-cache)"
    client = kcache.Client(args.server, deadline=args.deadline_ms / 1000.0,
                           toolkit_root=args.toolkit, client_name="worker.py")
    return client, f"kcached at {args.server or os.environ.get('KCACHE_ADDRESS') or 'the default address'}"


def load(kernel: kcache.Kernel, gpu: kcache.Gpu) -> int:
    """Checks and loads the kernel on the GPU, every entry point looked up (kcache.load, through
    cuda.core: an optional dependency of the example); returns the load micros."""
    start = time.perf_counter()
    kcache.load(kernel, gpu, via="cuda.core")
    return int((time.perf_counter() - start) * 1e6)


def report_gpu(sources: List[kcache.KernelSource], results: List[kcache.Result], gpu: kcache.Gpu,
               loads: bool) -> List[Dict[str, Any]]:
    reports: List[Dict[str, Any]] = []
    for s, result in zip(sources, results):
        report = {"name": s.name, "outcome": "skipped", "target": "", "kind": "", "rule": "",
                  "served_from": "", "reason": "", "bytes": 0, "resolve_micros": 0,
                  "load_micros": -1}
        reports.append(report)
        arch = gpu.device.arch
        if (s.min_arch and arch < s.min_arch) or (s.max_arch and arch > s.max_arch):
            fmt = lambda a: f"{a // 10}.{a % 10}" if a else ""  # noqa: E731
            report["reason"] = (f"its arch range {fmt(s.min_arch)}..{fmt(s.max_arch)} excludes "
                                f"{gpu.device}")
            continue
        if isinstance(result, kcache.Error):
            report.update(outcome="failed", reason=result.reason)
            continue
        report.update(outcome="served", target=result.target, kind=result.kind,
                      rule=result.rule, served_from=result.served_from, reason=result.reason,
                      bytes=len(result), resolve_micros=result.micros)
        if loads:
            try:
                report["load_micros"] = load(result, gpu)
            except Exception as e:  # noqa: BLE001  (a load failure is this kernel's failure)
                report.update(outcome="failed", reason=f"load: {e}")
    return reports


def print_text(mode: str, gpus: List[Dict[str, Any]], distinct: int, total: int) -> None:
    if len(gpus) > 1:
        print(f"node of {len(gpus)} GPUs, {distinct} distinct SMs (one resolve each)")
    print(f"kernels from {mode}")
    all_reports = [r for g in gpus for r in g["kernels"]]
    for g in gpus:
        prefix = f"GPU {g['ordinal']}: " if len(gpus) > 1 else ""
        print(f"{prefix}device {g['device']} (driver {g['driver']}; {g['note']})")
        for r in g["kernels"]:
            if r["outcome"] == "served":
                load_text = f"  load {r['load_micros'] / 1e3:.1f} ms" if r["load_micros"] >= 0 else ""
                print(f"  {r['name']:<28} {r['target']:<10} {r['kind']:<6} {r['rule']:<15} "
                      f"{r['served_from']:<19} {r['resolve_micros'] / 1e3:7.1f} ms{load_text}")
            else:
                print(f"  {r['name']:<28} {r['outcome']}: {r['reason']}")
    by_source = Counter(r["served_from"] for r in all_reports if r["outcome"] == "served")
    sources_text = ", ".join(f"{n} {k}" for k, n in sorted(by_source.items())) or "none served"
    skipped = sum(r["outcome"] == "skipped" for r in all_reports)
    failed = sum(r["outcome"] == "failed" for r in all_reports)
    node = f" x {len(gpus)} GPUs" if len(gpus) > 1 else ""
    print(f"total {len(gpus[0]['kernels'])} kernels{node} in {total / 1e3:.1f} ms "
          f"({sources_text}; {skipped} skipped, {failed} failed)")


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    try:
        sources = kcache.load_manifest(args.manifest)
    except kcache.Error as e:
        print(f"worker.py: {e.reason}", file=sys.stderr)
        return 2
    chosen = choose_gpus(args)
    if chosen is None:
        return 2
    gpus, loads = chosen
    client, mode = make_client(args)
    node = kcache.resolve_for_gpus(client, sources, gpus)
    per_gpu = []
    for g, gpu in enumerate(gpus):
        note = (f"GPU {gpu.ordinal}: {gpu.name}" if not args.device else
                f"--device; loaded on GPU {gpu.ordinal}: {gpu.name}" if loads[g] else
                "--device; no GPU of that SM here: kernels are not loaded")
        kernels = report_gpu(sources, node.for_gpu(g), gpu, loads[g])
        per_gpu.append({"ordinal": gpu.ordinal, "name": gpu.name, "device": str(gpu.device),
                        "driver": gpu.device.driver_version, "loaded": loads[g], "note": note,
                        "kernels": kernels,
                        "failed": sum(r["outcome"] == "failed" for r in kernels)})
    total = int((time.perf_counter() - start) * 1e6)
    client.close()

    failed = sum(g["failed"] for g in per_gpu)
    if args.json:
        first = per_gpu[0]
        print(json.dumps({"device": first["device"], "driver": first["driver"],
                          "gpu": first["name"] if first["loaded"] else None, "mode": mode,
                          "kernels": first["kernels"], "gpus": per_gpu,
                          "distinct_devices": len(node.devices), "failed": failed,
                          "total_micros": total}, indent=2))
    else:
        print_text(mode, per_gpu, len(node.devices), total)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run(parse_args()))
