"""kcached's compiler-launcher counters as `kcache stat --json` reports them, for the torch tests
and benches (docs/statistics.md: objects.*)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def object_counters(kcache: str, socket: Path) -> dict:
    """The objects.* counters of the kcached listening on unix://`socket`; exits when
    `kcache stat` fails."""
    stat = subprocess.run([kcache, "stat", "--server", f"unix://{socket}", "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if stat.returncode != 0:
        sys.exit(f"kcache stat failed: {stat.stdout}")
    return {k: v for k, v in json.loads(stat.stdout)["counters"].items()
            if k.startswith("objects.")}
