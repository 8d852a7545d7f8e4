"""Renders kustomizations with the real kustomize: `kubectl kustomize DIR` (kubectl 1.27 and
newer embed kustomize v5), or a standalone `kustomize build DIR`. $KUSTOMIZE, when set, names
the kustomize binary to use instead. Where neither is installed, render() raises
RendererMissing and the callers skip the rendering checks (saying so), not pass them.

One check kustomize does not make is added here: a patch whose target selects no resource
(kustomize applies it to nothing, silently, so a misspelt name drops the patch) is an error.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# The annotation a probe patch sets on what a target selects (see unselected_patch_targets).
_PROBE_ANNOTATION = "kcache-deploy-check.invalid/selected-by"


class RenderError(Exception):
    """The kustomization does not render; the message is kustomize's own."""


class RendererMissing(Exception):
    """Neither kubectl nor kustomize is installed."""


def show(path: str) -> str:
    """A path for messages: relative to the working folder when below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def renderer() -> list[str]:
    """The command that renders a kustomization folder given as its last argument."""
    if os.environ.get("KUSTOMIZE"):
        return [os.environ["KUSTOMIZE"], "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    raise RendererMissing(
        "no kustomize here: neither kubectl (1.27 or newer, which embeds kustomize v5) nor "
        "kustomize is on PATH; install kubectl, or set KUSTOMIZE to a kustomize binary")


def renderer_version() -> str:
    """What renders, for messages: "kubectl kustomize (Kustomize Version: v5.5.0)"."""
    command = renderer()
    probe = [command[0], "version", "--client"] if command[0] == "kubectl" else [command[0], "version"]
    try:
        out = subprocess.run(probe, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    m = re.search(r"Kustomize Version: (\S+)|(v5[0-9.]+)", out)
    version = (m.group(1) or m.group(2)) if m else "unknown version"
    return f"{' '.join(command)} {version}"


def _error_text(stderr: str) -> str:
    """kustomize's error without kubectl's log prefix (E1124 12:00:00.0 1 run.go:72] "command
    failed" err="...", or err=< ...multi-line... >) or kustomize's "Error: "."""
    text = stderr.strip()
    m = re.search(r'err="((?:[^"\\]|\\.)*)"', text)
    if m:
        return json.loads(f'"{m.group(1)}"')
    m = re.search(r"err=<\n(.*)\n\s*>", text, re.S)
    if m:  # on one line, as every message of the checks is
        return " ".join(line.strip() for line in m.group(1).split("\n") if line.strip())
    return re.sub(r"^Error: ", "", text)


def parse_yaml_text(text: str, where: str = "(text)") -> list:
    """Every non-empty YAML document of a text, read as Kubernetes reads YAML (1.1)."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as e:
        raise RenderError(f"{where}: YAML: {str(e).splitlines()[0]}") from None


def parse_yaml_file(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return parse_yaml_text(f.read(), show(path))


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _run(directory: str) -> list:
    command = renderer() + [directory]
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RenderError(f"{' '.join(command)} took over 120 s") from None
    if r.returncode != 0:
        raise RenderError(_error_text(r.stderr))
    return parse_yaml_text(r.stdout, " ".join(command))


def kustomization_file(directory: str) -> str:
    found = [n for n in KUSTOMIZATION_NAMES if os.path.exists(os.path.join(directory, n))]
    if not found:
        raise RenderError(f"{show(directory)}: no kustomization.yaml in this folder")
    return os.path.join(directory, found[0])


def render(directory: str) -> list:
    """The objects a kustomization renders, in kustomize's output order. Raises RenderError
    with kustomize's message (or for a patch target that selects nothing), RendererMissing
    where nothing can render."""
    kustomization_file(directory)
    objects = _run(directory)
    problems = unselected_patch_targets(directory)
    if problems:
        raise RenderError("; ".join(problems))
    return objects


def render_or_exit(directory: str) -> list:
    """render() for the command-line tools: on failure prints "error: ..." and exits 1 (does
    not render) or 2 (nothing installed that can render)."""
    try:
        return render(directory)
    except RendererMissing as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except RenderError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def unselected_patch_targets(directory: str) -> list[str]:
    """The patches of DIR's kustomization whose `target:` selects no resource, each as a
    message. Asked of kustomize itself, so its selection rules (regular expressions in names,
    label and annotation selectors) apply: a probe kustomization in a temporary folder takes DIR
    as its resource and, for every targeted patch, a patch with the same target that only
    annotates what it selects."""
    kfile = kustomization_file(directory)
    (spec,) = parse_yaml_file(kfile) or [{}]
    patches = spec.get("patches") or [] if isinstance(spec, dict) else []
    targeted = [(i, p["target"]) for i, p in enumerate(patches)
                if isinstance(p, dict) and isinstance(p.get("target"), dict)]
    if not targeted:
        return []
    with tempfile.TemporaryDirectory(prefix="kcache-kustomize-") as probe:
        probe_spec = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            # kustomize refuses absolute resource paths.
            "resources": [os.path.relpath(os.path.abspath(directory), probe)],
            "patches": [{
                "target": target,
                "patch": yaml.safe_dump({"apiVersion": "v1", "kind": "Probe", "metadata": {
                    "name": "probe", "annotations": {f"{_PROBE_ANNOTATION}-{i}": "yes"}}}),
            } for i, target in targeted],
        }
        with open(os.path.join(probe, "kustomization.yaml"), "w", encoding="utf-8") as f:
            yaml.safe_dump(probe_spec, f)
        objects = _run(probe)
    selected = {key for o in objects
                for key in ((o.get("metadata") or {}).get("annotations") or {})}
    return [f"{show(kfile)}: patches[{i}]: target {json.dumps(target, separators=(',', ':'))} "
            "selects no resource (kustomize would apply it to nothing)"
            for i, target in targeted if f"{_PROBE_ANNOTATION}-{i}" not in selected]


def object_name(obj) -> str:
    if not isinstance(obj, dict):
        return "(not an object)"
    return f"{obj.get('kind', '?')}/{(obj.get('metadata') or {}).get('name', '?')}"
