#!/usr/bin/env python3
"""Renders a kustomization with kustomize (`kubectl kustomize DIR`), refuses a patch whose
target selects nothing (as the deploy checks do), and prints the objects as YAML documents, or
with --json as one JSON array. Exit 1 when it does not render, 2 on a usage error or when no
kustomize is installed.

  scripts/venv-python deploy/tools/render.py deploy/k8s/overlays/pvc
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kcache_deploy.deps import require_deps  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(prog="render.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument("directory", metavar="KUSTOMIZATION_DIR")
    opts = p.parse_args()
    require_deps()
    import yaml
    from kcache_deploy.kustomize import render_or_exit
    objects = render_or_exit(opts.directory)
    if opts.json:
        print(json.dumps(objects, indent=2))
    else:
        sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False, width=1 << 20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
