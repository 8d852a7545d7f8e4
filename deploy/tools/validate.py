#!/usr/bin/env python3
"""Checks deploy/: renders deploy/k8s/base and every overlay with kustomize, validates every
object against the official Kubernetes schemas (strict: unknown fields refused), cross-checks
the kcached sidecar with the daemon's real flags (from `kcached --help`) and with the rest of
its pod, and checks the systemd unit's ExecStart. One line per check.

Exit 0: every check passed; 1: a check failed; 2: usage error or missing Python packages;
125: nothing failed, but the kustomizations were not rendered because neither kubectl nor
kustomize is installed (the systemd checks still ran).

  scripts/venv-python deploy/tools/validate.py --kcached build/daemon/kcached
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kcache_deploy.deps import require_deps  # noqa: E402  (uses no package)

DEPLOY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(
        prog="validate.py", description=__doc__.split("\n\n")[0],
        epilog="Without --kustomization and --systemd: deploy/k8s/base, every "
               "deploy/k8s/overlays/*, and deploy/systemd/*.service.")
    p.add_argument("--kcached", required=True, metavar="PATH",
                   help="the kcached binary; its --help gives the flags the manifests may use")
    p.add_argument("--worker", metavar="PATH",
                   help="also check the worker container's args against this binary's --help")
    p.add_argument("--kustomization", action="append", default=[], metavar="DIR",
                   help='check this kustomization (repeatable); its folder name sets the variant: '
                        '"pvc" in it: store on a PVC; "no-baked": no --baked; else --baked')
    p.add_argument("--systemd", action="append", default=[], metavar="UNIT",
                   help="check this systemd unit (repeatable)")
    p.add_argument("--kubernetes-version", metavar="X.Y",
                   help="validate against this Kubernetes version's schemas (default: 1.29, the "
                        "oldest with native sidecars on by default)")
    return p.parse_args()


def main() -> int:
    opts = parse_args()
    require_deps()
    from kcache_deploy.checks import Report, check_kustomization, check_systemd_unit
    from kcache_deploy.cliflags import FlagsError, read_flags
    from kcache_deploy.kustomize import RendererMissing, renderer_version
    from kcache_deploy.schema import DEFAULT_KUBERNETES_VERSION, package_version

    if not opts.kustomization and not opts.systemd:
        opts.kustomization.append(os.path.join(DEPLOY, "k8s", "base"))
        overlays = os.path.join(DEPLOY, "k8s", "overlays")
        if os.path.isdir(overlays):
            opts.kustomization += [os.path.join(overlays, n) for n in sorted(os.listdir(overlays))]
        systemd = os.path.join(DEPLOY, "systemd")
        if os.path.isdir(systemd):
            opts.systemd += [os.path.join(systemd, n) for n in sorted(os.listdir(systemd))
                             if n.endswith(".service")]
    try:
        kcached_flags = read_flags(opts.kcached)
        worker_flags = read_flags(opts.worker) if opts.worker else None
    except FlagsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    version = opts.kubernetes_version or DEFAULT_KUBERNETES_VERSION
    report = Report()
    missing = None
    try:
        print(f"rendering with {renderer_version()}; schemas of Kubernetes {version} "
              f"(kubernetes-validate {package_version()})")
    except RendererMissing as e:
        missing = str(e)
    for directory in opts.kustomization:
        if missing:
            report.skip(os.path.relpath(directory), "renders", missing)
            continue
        check_kustomization(report, directory, kcached_flags, worker_flags, version)
    for unit in opts.systemd:
        check_systemd_unit(report, unit, kcached_flags)
    verdict = "FAILED" if report.failed else "skipped" if report.skipped else "passed"
    print(f"{verdict}: {report.passed} checks passed, {report.failed} failed"
          + (f", {report.skipped} skipped" if report.skipped else ""))
    return 1 if report.failed else 125 if report.skipped else 0


if __name__ == "__main__":
    sys.exit(main())
