#!/usr/bin/env python3
"""Prints the args of one container (or init container) of the workload a kustomization
renders, one per line, so a script can start a program with the manifest's own flags:

  mapfile -t args < <(scripts/venv-python deploy/tools/pod_args.py deploy/k8s/base kcached)
  build/daemon/kcached "${args[@]}"

--kind/--name pick the workload when the kustomization renders more than one (default: the
one workload holding a container of that name). --command prints the container's command
first. --env prints the container's environment instead, NAME=VALUE a line (entries given
by value; valueFrom entries are left out). Exit 1 when the kustomization does not render or the container is not found; 2 on a
usage error or when no kustomize is installed.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kcache_deploy.deps import require_deps  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(prog="pod_args.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--command", action="store_true", help="print the container's command first")
    p.add_argument("--env", action="store_true",
                   help="print the container's environment (NAME=VALUE) instead of its args")
    p.add_argument("--kind", help="the workload's kind")
    p.add_argument("--name", help="the workload's name")
    p.add_argument("directory", metavar="KUSTOMIZATION_DIR")
    p.add_argument("container", metavar="CONTAINER")
    opts = p.parse_args()
    require_deps()
    from kcache_deploy.checks import containers_of, pod_spec_of
    from kcache_deploy.kustomize import object_name, render_or_exit
    objects = render_or_exit(opts.directory)
    found = []
    for obj in objects:
        if opts.kind and obj.get("kind") != opts.kind:
            continue
        if opts.name and (obj.get("metadata") or {}).get("name") != opts.name:
            continue
        pod = pod_spec_of(obj)
        found += [(obj, c) for c in containers_of(pod[0] if pod else None)
                  if c.get("name") == opts.container]
    if len(found) != 1:
        what = (f"{len(found)} containers named {opts.container} "
                f"({', '.join(object_name(o) for o, _ in found)}); pick one with --kind/--name"
                if found else f"no container or init container named {opts.container}")
        print(f"error: {opts.directory}: {what}", file=sys.stderr)
        return 1
    container = found[0][1]
    if opts.env:
        lines = [f"{e['name']}={e['value']}" for e in container.get("env") or [] if "value" in e]
    else:
        lines = [str(a) for a in (container.get("command") or [] if opts.command else [])]
        lines += [str(a) for a in container.get("args") or []]
    if any("\n" in line for line in lines):
        print(f"error: an arg of {opts.container} holds a newline; one-per-line output cannot carry it",
              file=sys.stderr)
        return 1
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
