"""FlashInfer's JIT through kcache's compiler launchers, end to end.

One module, gen_concat_mla_module (one .cu and the link: the quickest of FlashInfer's
zero-argument modules to build, ~8 s on 2 cores), built by deploy/tools/flashinfer_warm.py:
  1. without kcache, for reference;
  2. at image build, recorded with `kcache run --store --arch 9.0` (nvcc through
     FLASHINFER_NVCC_LAUNCHER, the link through CXX);
  3. in a pod: a fresh FLASHINFER_WORKSPACE_BASE at another path, a new kcached over that
     store baked, an empty state directory of another HOME (so kcache run's default shims
     directory, and CUDA_HOME's shim toolkit, are at other paths: another user's), `kcache
     run --server`.
The pod must hit every command the image recorded and miss none, kcached must count no compile
run uncached (FlashInfer's `nvcc --version`, asked for the CUDA version, is no compile), and
the pod's .so must be the image's bytes and equal the reference once nvcc's temporary-file
names are masked: nvcc compiles the host side from `tmpxft_<pid>_<counter>-..._<file>.cudafe1.cpp`
and that name lands in the object (the file symbol, the static initializer
`_GLOBAL__sub_I_tmpxft_...`), so two builds without kcache differ in exactly those bytes.
Exits 125 (skipped) when flashinfer is not importable.

Usage: flashinfer_jit_test.py KCACHE KCACHED
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from flashinfer_pod import (build, kcache_lines, module_so, start_baked_kcached, uncached_compiles,
                            uncached_counted)
from kcache_stat import object_counters

GENERATOR, MODULE = "gen_concat_mla_module", "concat_mla"
TEMP_NAME = re.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")


def main() -> int:
    try:
        import flashinfer.jit  # noqa: F401
    except ImportError as e:
        print(f"skipped: flashinfer is not importable ({e})")
        return 125
    kcache, kcached = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="kcache-flashinfer-") as tmp_name:
        tmp = Path(tmp_name)
        build([GENERATOR], tmp / "reference", {"FLASHINFER_CUDA_ARCH_LIST": "9.0"})
        reference = module_so(tmp / "reference", MODULE).read_bytes()

        # Each side's shims in its own state directory, as two users' would be.
        shims = ["--arch", "9.0", "--"]
        _, image = build([GENERATOR], tmp / "image",
                         {"KCACHE_STATE_DIR": str(tmp / "state"), "HOME": str(tmp / "root")},
                         [kcache, "run", "--store", str(tmp / "baked"), *shims])
        recorded = len(kcache_lines(image, "miss"))
        if recorded != 2 or kcache_lines(image, "hit"):  # the .cu and the link
            sys.exit(f"image build: expected 2 misses and no hit, got:\n{image}")

        daemon, socket = start_baked_kcached(kcached, tmp / "baked", tmp / "pod-kcached")
        try:
            seconds, pod = build([GENERATOR], tmp / "pod" / "home" / "other",
                                 {"KCACHE_STATE_DIR": str(tmp / "pod-state"),
                                  "HOME": str(tmp / "pod" / "home")},
                                 [kcache, "run", "--server", f"unix://{socket}", *shims])
            counters = object_counters(kcache, socket)
        finally:
            daemon.terminate()
            daemon.wait(30)

        for name, output in (("image build", image), ("pod", pod)):
            if uncached_compiles(output):
                sys.exit(f"{name}: commands ran uncached:\n" + "\n".join(uncached_compiles(output)))
        if len(kcache_lines(pod, "hit")) != recorded or kcache_lines(pod, "miss"):
            sys.exit(f"pod: expected {recorded} hits and no miss, got:\n{pod}")
        if (uncached_counted(counters) or counters.get("objects.served") != recorded
                or counters.get("objects.stored", 0) != 0):
            sys.exit(f"kcached: expected {recorded} served, none stored and no compile "
                     f"uncached, counted {counters}")

        served = module_so(tmp / "pod" / "home" / "other", MODULE).read_bytes()
        if served != module_so(tmp / "image", MODULE).read_bytes():
            sys.exit(f"the pod's {MODULE}.so is not the image build's")
        mask = b"tmpxft_XXXXXXXX_XXXXXXXX"
        if TEMP_NAME.sub(mask, served) != TEMP_NAME.sub(mask, reference):
            sys.exit(f"the pod's {MODULE}.so differs from a build without kcache beyond "
                     "nvcc's temporary-file names")
        print(f"ok: the image recorded {recorded} commands; the pod hit all of them in "
              f"{seconds:.2f} s and its {MODULE}.so ({len(served)} bytes) is the image's, and a "
              "build without kcache's but for nvcc's temporary-file names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
