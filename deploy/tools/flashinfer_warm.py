#!/usr/bin/env python3
"""Builds FlashInfer's JIT modules ahead of time, without a GPU: each named module generator
of flashinfer.jit is called and its module built (ninja, nvcc and c++), so that under
`kcache run --store DIR --arch ...` every compile is recorded into the store and a pod's
`kcache run --server ...` serves them (deploy/Dockerfile, KCACHE_FLASHINFER;
docs/jit-libraries.md).

    kcache run --store /opt/kcache/store --arch 8.9,9.0 -- \\
        python3 deploy/tools/flashinfer_warm.py gen_norm_module gen_sampling_module

A generator is a zero-argument function found in flashinfer.jit or one of its submodules
(gen_norm_module, gen_page_module, gen_rope_module, gen_sampling_module, gen_cascade_module,
...). `kcache run --arch` sets FLASHINFER_CUDA_ARCH_LIST, which FlashInfer reads instead of
asking a GPU. The modules go to FlashInfer's workspace ($FLASHINFER_WORKSPACE_BASE/.cache/
flashinfer, default under $HOME); a pod needs none of it: its build of the same module, in a
workspace at any path, is served by kcached. Prints each module's build seconds;
--verbose also prints ninja's commands and output.
Exit codes: 0 built, 1 a build failed, 2 bad input (no flashinfer, no such generator)."""
import argparse
import importlib
import pkgutil
import sys
import time


def find_generator(jit, name):
    """The zero-argument generator `name` in flashinfer.jit or a submodule; None if absent."""
    if callable(getattr(jit, name, None)):
        return getattr(jit, name)
    for info in pkgutil.walk_packages(jit.__path__, jit.__name__ + "."):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # a submodule needing what this image lacks holds no generator we use
            continue
        if callable(getattr(module, name, None)):
            return getattr(module, name)
    return None


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("generators", nargs="+", metavar="GENERATOR",
                        help="module generators of flashinfer.jit, e.g. gen_norm_module")
    parser.add_argument("--verbose", action="store_true",
                        help="print ninja's commands and output (with KCACHE_LOG=1, each "
                        "launcher's hit, miss or uncached line); FLASHINFER_JIT_VERBOSE=1 "
                        "would also compile with -g -O0, another build")
    args = parser.parse_args(argv)
    try:
        jit = importlib.import_module("flashinfer.jit")
    except ImportError as e:
        print(f"flashinfer_warm: cannot import flashinfer.jit ({e}): install flashinfer-python "
              "(and torch) in this image first", file=sys.stderr)
        return 2
    generators = []
    for name in args.generators:
        generator = find_generator(jit, name)
        if generator is None:
            print(f"flashinfer_warm: flashinfer.jit has no generator {name!r}", file=sys.stderr)
            return 2
        generators.append((name, generator))
    for name, generator in generators:
        start = time.monotonic()
        try:
            generator().build(verbose=args.verbose)
        except Exception as e:  # the build's own output (ninja's, nvcc's) is above
            print(f"flashinfer_warm: {name}: {e}", file=sys.stderr)
            return 1
        print(f"flashinfer_warm: built {name} in {time.monotonic() - start:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
