#!/usr/bin/env python3
"""An example inference worker's start-up, in Python (examples/worker is the C++ one): find the
device, get every kernel of a manifest in one batch (Client.resolve_many) from kcached, or with
--no-cache compile them in this process with NVRTC as workers do without a cache, load them on
the GPU when there is one (with cuda.core, when installed), and report how long it all took.

  examples/python/worker.py --manifest kernels/manifest.yaml --device 8.9 [--server ADDR]
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
from typing import Any, Dict, List, Optional

import kcache


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest", required=True, help="kernel manifest (docs/manifest.md)")
    p.add_argument("--server", help="kcached address (default $KCACHE_ADDRESS, else "
                                    "unix:///run/kcache/kcache.sock)")
    p.add_argument("--device", help="resolve for this SM (e.g. 8.9) instead of the GPU")
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


def choose_device(args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    gpus = kcache.detect_devices()
    if not args.device:
        if not gpus:
            print("worker.py: no GPU to start on (pass --device 8.9 to resolve the kernels for "
                  "a device anyway)", file=sys.stderr)
            return None
        return {"device": gpus[0], "gpu": True, "note": "GPU 0"}
    try:
        device = kcache.Device.parse(args.device, args.driver)
    except ValueError as e:
        print(f"worker.py: --device: {e}", file=sys.stderr)
        return None
    gpu = False
    note = "--device"
    if gpus:
        if device.driver_version == 0:
            device = kcache.Device(device.sm_major, device.sm_minor, gpus[0].driver_version)
        gpu = gpus[0].arch == device.arch
    if not gpu:
        note += ("; the GPU is another SM: kernels are not loaded" if gpus
                 else "; no GPU: kernels are not loaded")
    return {"device": device, "gpu": gpu, "note": note}


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


def load(kernel: kcache.Kernel, names: List[str]) -> int:
    """Loads the module and looks up each function; returns the load micros."""
    from cuda.core import Device, ObjectCode  # an optional dependency of the example

    Device(0).set_current()
    start = time.perf_counter()
    code = (ObjectCode.from_cubin(bytes(kernel)) if kernel.kind == "cubin"
            else ObjectCode.from_ptx(bytes(kernel)))
    for name in names:
        code.get_kernel(name)
    return int((time.perf_counter() - start) * 1e6)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    try:
        sources = kcache.load_manifest(args.manifest)
    except kcache.Error as e:
        print(f"worker.py: {e.reason}", file=sys.stderr)
        return 2
    target = choose_device(args)
    if target is None:
        return 2
    device: kcache.Device = target["device"]
    client, mode = make_client(args)

    reports: List[Dict[str, Any]] = []
    wanted = []
    for s in sources:
        report = {"name": s.name, "outcome": "skipped", "target": "", "kind": "", "rule": "",
                  "served_from": "", "reason": "", "bytes": 0, "resolve_micros": 0,
                  "load_micros": -1}
        if (s.min_arch and device.arch < s.min_arch) or (s.max_arch and device.arch > s.max_arch):
            fmt = lambda a: f"{a // 10}.{a % 10}" if a else ""  # noqa: E731
            report["reason"] = (f"its arch range {fmt(s.min_arch)}..{fmt(s.max_arch)} excludes "
                                f"{device}")
        else:
            wanted.append((s, report))
        reports.append(report)

    results = client.resolve_many([s for s, _ in wanted], device)
    for (source, report), result in zip(wanted, results):
        if isinstance(result, kcache.Error):
            report.update(outcome="failed", reason=result.reason)
            continue
        report.update(outcome="served", target=result.target, kind=result.kind,
                      rule=result.rule, served_from=result.served_from, reason=result.reason,
                      bytes=len(result), resolve_micros=result.micros)
        if target["gpu"]:
            names = list(result.lowered_names.values()) or [source.name]
            try:
                report["load_micros"] = load(result, names)
            except Exception as e:  # noqa: BLE001  (a load failure is this kernel's failure)
                report.update(outcome="failed", reason=f"load: {e}")
    total = int((time.perf_counter() - start) * 1e6)
    client.close()

    failed = sum(r["outcome"] == "failed" for r in reports)
    if args.json:
        print(json.dumps({"device": str(device), "driver": device.driver_version,
                          "gpu": target["note"] if target["gpu"] else None, "mode": mode,
                          "kernels": reports, "failed": failed, "total_micros": total}, indent=2))
    else:
        print(f"device {device} (driver {device.driver_version}; {target['note']})")
        print(f"kernels from {mode}")
        for r in reports:
            if r["outcome"] == "served":
                load_text = f"  load {r['load_micros'] / 1e3:.1f} ms" if r["load_micros"] >= 0 else ""
                print(f"  {r['name']:<28} {r['target']:<10} {r['kind']:<6} {r['rule']:<15} "
                      f"{r['served_from']:<19} {r['resolve_micros'] / 1e3:7.1f} ms{load_text}")
            else:
                print(f"  {r['name']:<28} {r['outcome']}: {r['reason']}")
        by_source = Counter(r["served_from"] for r in reports if r["outcome"] == "served")
        sources_text = ", ".join(f"{n} {k}" for k, n in sorted(by_source.items())) or "none served"
        skipped = sum(r["outcome"] == "skipped" for r in reports)
        print(f"total {len(reports)} kernels in {total / 1e3:.1f} ms ({sources_text}; "
              f"{skipped} skipped, {failed} failed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run(parse_args()))
