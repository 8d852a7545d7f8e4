"""Checks that the Python environment running deploy/tools holds what requirements/test.txt
pins, before anything imports a package, so a missing install is one clear line instead of
an import error. Uses no package itself."""
from __future__ import annotations

import os
import re
import sys
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LOCK = os.path.join(REPO, "requirements", "test.txt")
# The packages deploy/tools imports (its own, not what they pull in).
USED = ("kubernetes-validate", "PyYAML", "jsonschema", "referencing")
FIX = ("run scripts/install-deps.sh, and run the tools with the project's Python "
       "(scripts/venv-python deploy/tools/validate.py ...)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_deps() -> str | None:
    """None when every package the tools use is installed at its pinned version, else why not."""
    pins = {}
    with open(LOCK, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
            if m:
                pins[_normal(m.group(1))] = m.group(2)
    for name in USED:
        pinned = pins.get(_normal(name))
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            return f"{sys.executable} has no {name} (requirements/test.txt pins {pinned}): {FIX}"
        if pinned and installed != pinned:
            return f"{sys.executable} has {name} {installed}, requirements/test.txt pins {pinned}: {FIX}"
    return None


def require_deps() -> None:
    """For the command-line entry points: exits 2 with the message when the install is missing."""
    problem = check_deps()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
