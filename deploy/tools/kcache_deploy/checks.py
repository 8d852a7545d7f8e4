"""The checks of deploy/: each kustomization renders, every object it renders is a valid
Kubernetes object, and the kcached sidecar's flags agree with the daemon and with the rest of
its pod; the systemd unit's ExecStart agrees with the daemon and with its own comments."""
from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import sys

from .cliflags import check_args, flag_value
from .kustomize import RenderError, object_name, render, show
from .schema import DEFAULT_KUBERNETES_VERSION, validate_object


class Report:
    """Prints one line per check: "ok   <subject>: <check>", or "FAIL <subject>: <check>:
    <problem>" once per problem, or "SKIP <subject>: <check>: <why>"."""

    def __init__(self, out=None):
        self.out = out or (lambda line: print(line, file=sys.stdout, flush=True))
        self.passed = self.failed = self.skipped = 0

    def check(self, subject: str, what: str, problems: list[str]) -> bool:
        if problems:
            self.failed += 1
            for p in problems:
                self.out(f"FAIL {subject}: {what}: {p}")
        else:
            self.passed += 1
            self.out(f"ok   {subject}: {what}")
        return not problems

    def skip(self, subject: str, what: str, why: str) -> None:
        self.skipped += 1
        self.out(f"SKIP {subject}: {what}: {why}")


# The kcache sidecar's name, the volume types that can hold a writable store, and the address
# the probe port must bind (the kubelet probes the pod IP, not loopback).
SIDECAR = "kcached"
WRITABLE_VOLUMES = ("emptyDir", "persistentVolumeClaim", "ephemeral", "hostPath", "nfs", "csi")
PROBE_ADDRESS = "0.0.0.0"
HEALTH_SERVICES = ("", "kcache.v1.KernelCache")


def variant_of(directory: str) -> dict[str, bool]:
    """What an overlay's name promises: `pvc` in the name: the store is on a
    PersistentVolumeClaim; `no-baked`: no --baked; otherwise at least one --baked."""
    name = os.path.basename(os.path.abspath(directory))
    return {"pvc": bool(re.search(r"(^|-)pvc(-|$)", name)),
            "no_baked": bool(re.search(r"(^|-)no-baked(-|$)", name))}


def _get(obj, *path):
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def pod_spec_of(obj):
    """(pod spec, its path, the pod template's metadata) of a workload, or None."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == "Pod":
        return obj.get("spec"), "spec", obj.get("metadata")
    if kind == "CronJob":
        template = _get(obj, "spec", "jobTemplate", "spec", "template")
        return _get(template, "spec"), "spec.jobTemplate.spec.template.spec", _get(template, "metadata")
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        template = _get(obj, "spec", "template")
        return _get(template, "spec"), "spec.template.spec", _get(template, "metadata")
    return None


def containers_of(spec) -> list:
    """The init containers and containers of a pod spec, in that order."""
    return [c for key in ("initContainers", "containers") for c in (_get(spec, key) or [])
            if isinstance(c, dict)]


def _mount_holding(container, path: str):
    """The mount of a container that holds `path` (longest mountPath prefix), or None."""
    best = None
    p = posixpath.normpath(path)
    for m in container.get("volumeMounts") or []:
        mp = posixpath.normpath(m.get("mountPath") or "")
        if (p == mp or p.startswith(mp.rstrip("/") + "/")) and (
                best is None or len(mp) > len(posixpath.normpath(best["mountPath"]))):
            best = m
    return best


def _volume_type(volume):
    return next((k for k in (volume or {}) if k != "name"), None)


def _arg_values(args, flag: str) -> list[str]:
    args = [str(a) for a in args or []]
    out = []
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith(flag + "="):
            out.append(a[len(flag) + 1:])
    return out


def _js(value) -> str:
    """A value in a message, as the manifest would spell it (undefined when absent)."""
    return "undefined" if value is None else json.dumps(value)


def _check_probes(report, subject, sc, at, sidecar, meta, port):
    problems = []
    if not port:
        problems.append(f"{sc}.args: --probe-port is not set (the gRPC probes need it)")
    for name in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = sidecar.get(name)
        if not probe:
            problems.append(f"{sc}.{name} is missing")
        elif not probe.get("grpc"):
            problems.append(f"{sc}.{name} is not a grpc probe")
        else:
            if probe["grpc"].get("port") != port:
                problems.append(f"{sc}.{name}.grpc.port is {_js(probe['grpc'].get('port'))}, --probe-port is {port}")
            service = probe["grpc"].get("service")
            if service is not None and service not in HEALTH_SERVICES:
                answers = " and ".join(json.dumps(s) for s in HEALTH_SERVICES)
                problems.append(f"{sc}.{name}.grpc.service {json.dumps(service)}: kcached's health service answers only {answers}")
    named = [p for p in sidecar.get("ports") or [] if p.get("name") == "probe"]
    if len(named) != 1:
        problems.append(f"{sc}.ports: want one port named probe, found {len(named)}")
    elif named[0].get("containerPort") != port:
        problems.append(f"{sc}.ports[probe].containerPort is {_js(named[0].get('containerPort'))}, --probe-port is {port}")
    annotations = (meta or {}).get("annotations") or {}
    meta_at = re.sub(r"\.spec$", ".metadata", at)
    if "prometheus.io/port" in annotations:
        if annotations["prometheus.io/port"] != str(port):
            problems.append(f'{meta_at}.annotations["prometheus.io/port"] is {_js(annotations["prometheus.io/port"])}, --probe-port is {port}')
    elif annotations.get("prometheus.io/scrape") == "true":
        problems.append(f'{meta_at}.annotations: prometheus.io/scrape is "true" but prometheus.io/port is missing')
    report.check(subject, f'probes, port "probe" and prometheus.io/port agree with --probe-port ({port})', problems)


def _check_socket(report, subject, sc, at, sidecar, apps, volumes, listen):
    problems = []
    m = re.fullmatch(r"unix://(/.+)", listen or "")
    if not m:
        problems.append(f"{sc}.args: --listen is {_js(listen)}, want unix:///<absolute path>")
    else:
        folder = posixpath.dirname(posixpath.normpath(m.group(1)))
        mount = next((vm for vm in sidecar.get("volumeMounts") or []
                      if posixpath.normpath(vm.get("mountPath") or "") == folder), None)
        if mount is None:
            problems.append(f"{sc}.volumeMounts: the socket's folder {folder} (--listen) is not a volumeMount of kcached")
        else:
            if mount.get("readOnly"):
                problems.append(f"{sc}.volumeMounts[{mount['name']}] is readOnly: kcached cannot create the socket")
            if mount.get("name") not in volumes:
                problems.append(f"{at}.volumes: no volume {mount.get('name')} (mounted at {folder})")
            for app in apps:
                ca = f"{at}.containers[{app.get('name')}]"
                theirs = next((vm for vm in app.get("volumeMounts") or [] if vm.get("name") == mount.get("name")), None)
                if theirs is None:
                    problems.append(f"{ca}.volumeMounts: does not mount {mount.get('name')}, the volume holding kcached's socket ({folder})")
                elif posixpath.normpath(theirs.get("mountPath") or "") != folder:
                    problems.append(f"{ca}.volumeMounts[{mount.get('name')}].mountPath is {theirs.get('mountPath')}, kcached's socket folder is {folder}")
    report.check(subject, f"the socket folder of --listen ({listen}) is a volume kcached and the app containers share", problems)

    problems = []
    for app in apps:
        ca = f"{at}.containers[{app.get('name')}]"
        env = [e for e in app.get("env") or [] if e.get("name") == "KCACHE_ADDRESS"]
        if not env:
            problems.append(f"{ca}.env: no KCACHE_ADDRESS")
        for e in env:
            if e.get("value") != listen:
                problems.append(f"{ca}.env[KCACHE_ADDRESS] is {_js(e.get('value'))}, kcached --listen is {listen}")
        for v in _arg_values(app.get("args"), "--server"):
            if v != listen:
                problems.append(f"{ca}.args: --server is {v}, kcached --listen is {listen}")
    report.check(subject, "app containers' --server and KCACHE_ADDRESS equal kcached --listen", problems)


def _check_store(report, subject, sc, at, sidecar, volumes, store):
    """Checks --store is on a writable volume; returns that volume (or None)."""
    problems = []
    volume = None
    if store:
        mount = _mount_holding(sidecar, store)
        volume = volumes.get(mount.get("name")) if mount else None
        if mount is None:
            problems.append(f"{sc}.volumeMounts: --store {store} is on no volume (the root filesystem is read-only or ephemeral)")
        elif mount.get("readOnly"):
            problems.append(f"{sc}.volumeMounts[{mount['name']}] holding --store {store} is readOnly")
        elif volume is None:
            problems.append(f"{at}.volumes: no volume {mount.get('name')} (holding --store {store})")
        elif _volume_type(volume) not in WRITABLE_VOLUMES:
            problems.append(f"{at}.volumes[{mount['name']}] holding --store {store} is a {_volume_type(volume)} volume, which is not writable")
    report.check(subject, f"--store ({store}) is on a writable volume", problems)
    return volume


def _check_claim_sharing(report, subject, workload, store_volume):
    """A claim is shared by every pod of a Deployment, and a store is opened by one kcached at a
    time (RocksDB's lock): a second pod's kcached cannot start, so a rolling update that waits
    for it never ends. One replica, and Recreate."""
    claim = _get(store_volume, "persistentVolumeClaim", "claimName")
    if not claim or workload.get("kind") not in ("Deployment", "ReplicaSet"):
        return
    problems = []
    replicas = _get(workload, "spec", "replicas")
    replicas = 1 if replicas is None else replicas
    if replicas > 1:
        problems.append(f"spec.replicas is {replicas}: every replica's kcached would open the store on claim {claim}")
    strategy = _get(workload, "spec", "strategy", "type")
    if workload.get("kind") == "Deployment" and strategy != "Recreate":
        problems.append(f"spec.strategy.type is {strategy or 'RollingUpdate (the default)'}, want Recreate: "
                        f"the new pod's kcached cannot open the store on claim {claim} while the old pod's has it")
    report.check(subject, f"the store on claim {claim} is opened by one kcached at a time (one replica, strategy Recreate)", problems)


def _check_baked(report, subject, sc, at, sidecar, objects, variant, baked, store_volume):
    problems = []
    for b in baked:
        mount = _mount_holding(sidecar, b)
        if mount:
            problems.append(f"{sc}.args: --baked {b} is on volume {mount.get('name')} (mounted at {mount.get('mountPath')}); baked stores come from the image")
    report.check(subject, f"--baked ({', '.join(baked) if baked else 'none'}) is in the image, on no volume", problems)

    problems = []
    if variant["no_baked"] and baked:
        problems.append(f"{sc}.args: a no-baked variant passes --baked {', '.join(baked)}")
    if not variant["no_baked"] and not baked:
        problems.append(f"{sc}.args: no --baked (only no-baked variants may leave it out)")
    if variant["pvc"]:
        claim = _get(store_volume, "persistentVolumeClaim", "claimName")
        if not claim:
            problems.append(f"{at}.volumes: a pvc variant's store volume {(store_volume or {}).get('name', '(none)')} "
                            f"is {_volume_type(store_volume) or 'missing'}, want persistentVolumeClaim")
        elif not any(o.get("kind") == "PersistentVolumeClaim" and _get(o, "metadata", "name") == claim for o in objects):
            problems.append(f"{at}.volumes[{store_volume['name']}].persistentVolumeClaim.claimName {claim}: "
                            "no PersistentVolumeClaim of that name is rendered here")
    says = ", ".join(s for s in ("store on a PVC" if variant["pvc"] else None,
                                 "no --baked" if variant["no_baked"] else "--baked") if s)
    report.check(subject, f"variant (by name): {says}", problems)


def check_pod(report, subject, workload, pod, objects, kcached_flags, worker_flags, variant):
    """Checks one pod spec holding the kcached sidecar."""
    spec, at, meta = pod
    sidecar = next(c for c in spec["initContainers"] if c.get("name") == SIDECAR)
    sc = f"{at}.initContainers[{SIDECAR}]"
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    apps = [c for c in spec.get("containers") or [] if isinstance(c, dict)]

    report.check(subject, f"{sc} is a native sidecar (restartPolicy: Always)",
                 [] if sidecar.get("restartPolicy") == "Always"
                 else [f"{sc}.restartPolicy is {_js(sidecar.get('restartPolicy'))}, want Always"])

    problems, values = check_args(sidecar.get("args") or [], kcached_flags, "kcached")
    report.check(subject, f"{sc}.args are flags kcached accepts", [f"{sc}.args: {p}" for p in problems])

    def one(name):
        return flag_value(values, kcached_flags, name)

    try:
        port = int(one("--probe-port") or 0)
    except ValueError:
        port = 0
    _check_probes(report, subject, sc, at, sidecar, meta, port)

    address = one("--probe-address")
    default = "" if "--probe-address" in values else " (kcached's default)"
    report.check(subject, f"--probe-address is {PROBE_ADDRESS} (the kubelet probes the pod IP)",
                 [] if address == PROBE_ADDRESS else
                 [f"{sc}.args: --probe-address is {address}{default}, want {PROBE_ADDRESS}"])

    _check_socket(report, subject, sc, at, sidecar, apps, volumes, one("--listen"))

    if worker_flags is not None:
        worker = next((c for c in apps if c.get("name") == "worker"), None)
        problems = check_args(worker.get("args") or [], worker_flags, "the worker")[0] if worker else ["no container named worker"]
        report.check(subject, f"{at}.containers[worker].args are flags the worker accepts",
                     [f"{at}.containers[worker].args: {p}" for p in problems])

    store_volume = _check_store(report, subject, sc, at, sidecar, volumes, one("--store"))
    _check_claim_sharing(report, subject, workload, store_volume)
    _check_baked(report, subject, sc, at, sidecar, objects, variant, values.get("--baked") or [], store_volume)


def check_kustomization(report, directory, kcached_flags, worker_flags=None,
                        kubernetes_version=DEFAULT_KUBERNETES_VERSION):
    """Renders one kustomization and runs every check on it. Raises RendererMissing where
    nothing can render."""
    subject = show(os.path.abspath(directory))
    try:
        objects = render(directory)
    except RenderError as e:
        report.check(subject, "renders", [str(e)])
        return
    report.check(subject, f"renders ({', '.join(object_name(o) for o in objects)})", [])
    for obj in objects:
        problems = validate_object(obj, kubernetes_version)
        report.check(f"{subject}: {object_name(obj)}",
                     f"valid {obj.get('apiVersion')} {obj.get('kind')} (Kubernetes {kubernetes_version} schema, strict)",
                     [("field " if p.startswith("/") else "") + p for p in problems])
    pods = []
    for obj in objects:
        pod = pod_spec_of(obj)
        if pod and isinstance(pod[0], dict) and any(
                isinstance(c, dict) and c.get("name") == SIDECAR for c in pod[0].get("initContainers") or []):
            pods.append((obj, pod))
    report.check(subject, f"a workload runs the {SIDECAR} sidecar",
                 [] if pods else [f"no rendered workload has an initContainer named {SIDECAR}"])
    for obj, pod in pods:
        check_pod(report, f"{subject}: {object_name(obj)}", obj, pod, objects, kcached_flags,
                  worker_flags, variant_of(directory))


# ---- systemd ----

def parse_unit(text: str):
    """Splits a unit file into ({section: [(key, value, line)]}, [comment text]), joining
    continuation lines."""
    sections: dict[str, list] = {}
    comments: list[str] = []
    section = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        line_no = i + 1
        i += 1
        if line.startswith(("#", ";")):
            comments.append(line[1:].strip())
            continue
        if not line:
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " " + lines[i].strip()
            i += 1
        m = re.fullmatch(r"\[(.+)\]", line)
        if m:
            section = m.group(1)
            sections.setdefault(section, [])
            continue
        key, eq, value = line.partition("=")
        if eq and section:
            sections[section].append((key.strip(), value.strip(), line_no))
    return sections, comments


def check_systemd_unit(report, path, kcached_flags):
    subject = show(os.path.abspath(path))
    with open(path, encoding="utf-8") as f:
        sections, comments = parse_unit(f.read())
    service = sections.get("Service", [])

    def get(key):
        return [(v, n) for k, v, n in service if k == key]

    execs = get("ExecStart")
    if len(execs) != 1:
        report.check(subject, "[Service] ExecStart", [f"want one ExecStart=, found {len(execs)}"])
        return
    value, line = execs[0]
    argv = shlex.split(re.sub(r"^[-@:+!]+", "", value))  # systemd's quoting is shell-like
    at = f"[Service] ExecStart (line {line})"
    problems, values = check_args(argv[1:], kcached_flags, "kcached")
    report.check(subject, f"{at} flags are flags kcached accepts", [f"{at}: {p}" for p in problems])

    def one(name):
        return flag_value(values, kcached_flags, name)

    # The comment names the socket and where health answers.
    listen, port, address = one("--listen"), one("--probe-port"), one("--probe-address")
    text = " ".join(comments)
    socket_m = re.search(r"unix:///[^\s\"'(),;]+", text)
    comment_socket = re.sub(r"\.$", "", socket_m.group(0)) if socket_m else None
    health = re.search(r"health on (\[[^\]]+\]|[^\s:]+):([0-9]+)", text, re.I)
    problems = []
    if not comment_socket:
        problems.append("no comment names the socket (unix:///...)")
    elif comment_socket != listen:
        problems.append(f"the comment says the socket is {comment_socket}, {at} has --listen {listen}")
    if not health:
        problems.append('no comment says where health answers ("health on ADDRESS:PORT")')
    else:
        if health.group(2) != str(port):
            problems.append(f"the comment says health is on port {health.group(2)}, {at} has --probe-port {port}")
        if health.group(1) != address:
            default = "" if "--probe-address" in values else " (kcached's default)"
            problems.append(f"the comment says health is on {health.group(1)}, {at} has --probe-address {address}{default}")
    report.check(subject, f"socket ({listen}) and health ({address}:{port}) agree with the unit's comment", problems)

    # With ProtectSystem=strict only the unit's own directories (and ReadWritePaths) are writable.
    strict = any(v == "strict" for v, _ in get("ProtectSystem"))
    writable = [f"{prefix}{d}" for key, prefix in (("RuntimeDirectory", "/run/"), ("StateDirectory", "/var/lib/"),
                                                   ("CacheDirectory", "/var/cache/"))
                for v, _ in get(key) for d in v.split()]
    writable += [re.sub(r"^[-+]+", "", d) for v, _ in get("ReadWritePaths") for d in v.split()]

    def under(p):
        return any(p == d or p.startswith(d.rstrip("/") + "/") for d in writable)

    problems = []
    if strict:
        socket = re.fullmatch(r"unix://(/.+)", listen or "")
        if socket and not under(posixpath.dirname(socket.group(1))):
            problems.append(f"{at}: the socket folder {posixpath.dirname(socket.group(1))} is not a RuntimeDirectory= "
                            "(or ReadWritePaths=) and ProtectSystem=strict makes it read-only")
        store = one("--store")
        if store and not under(store):
            problems.append(f"{at}: --store {store} is not under StateDirectory= (or ReadWritePaths=) "
                            "and ProtectSystem=strict makes it read-only")
    report.check(subject, f"socket folder and --store are writable under ProtectSystem={'strict' if strict else '(not strict)'}", problems)
