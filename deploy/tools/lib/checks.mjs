// The checks of deploy/: each kustomization renders, every object it renders is a valid
// Kubernetes object, and the kcached sidecar's flags agree with the daemon and with the rest
// of the pod; the systemd unit's ExecStart agrees with the daemon and with its own comments.
import { readFileSync } from "node:fs";
import { basename, posix, resolve } from "node:path";
import { checkArgs, flagValue } from "./cliflags.mjs";
import { objectName, render, RenderError, show } from "./kustomize.mjs";
import { modelsVersion, validateObject } from "./schema.mjs";

// Prints one line per check: "ok   <subject>: <check>", or "FAIL <subject>: <check>: <problem>"
// once per problem.
export class Report {
  constructor(out = (line) => process.stdout.write(line + "\n")) {
    this.out = out;
    this.failed = 0;
    this.passed = 0;
  }
  check(subject, what, problems) {
    if (problems.length === 0) {
      this.passed++;
      this.out(`ok   ${subject}: ${what}`);
    } else {
      this.failed++;
      for (const p of problems) this.out(`FAIL ${subject}: ${what}: ${p}`);
    }
    return problems.length === 0;
  }
}

// The kcache sidecar's name, the volume types that can hold a writable store, and the address
// the probe port must bind (the kubelet probes the pod IP, not loopback).
const SIDECAR = "kcached";
const WRITABLE_VOLUMES = ["emptyDir", "persistentVolumeClaim", "ephemeral", "hostPath", "nfs", "csi"];
const PROBE_ADDRESS = "0.0.0.0";
const HEALTH_SERVICES = ["", "kcache.v1.KernelCache"];

// What an overlay's name promises: `pvc` in the name: the store is on a PersistentVolumeClaim;
// `no-baked`: no --baked; otherwise at least one --baked.
export function variantOf(dir) {
  const name = basename(resolve(dir));
  return {
    pvc: /(^|-)pvc(-|$)/.test(name),
    noBaked: /(^|-)no-baked(-|$)/.test(name),
  };
}

function podSpecOf(obj) {
  switch (obj.kind) {
    case "Pod":
      return { spec: obj.spec, at: "spec", meta: obj.metadata };
    case "CronJob":
      return { spec: obj.spec?.jobTemplate?.spec?.template?.spec, at: "spec.jobTemplate.spec.template.spec", meta: obj.spec?.jobTemplate?.spec?.template?.metadata };
    case "Deployment":
    case "StatefulSet":
    case "DaemonSet":
    case "ReplicaSet":
    case "Job":
      return { spec: obj.spec?.template?.spec, at: "spec.template.spec", meta: obj.spec?.template?.metadata };
    default:
      return null;
  }
}

// The mount of a container that holds `path` (longest mountPath prefix), or undefined.
function mountHolding(container, path) {
  let best;
  for (const m of container.volumeMounts ?? []) {
    const mp = posix.normalize(m.mountPath ?? "");
    const p = posix.normalize(path);
    if ((p === mp || p.startsWith(mp.endsWith("/") ? mp : mp + "/")) && (!best || mp.length > best.mountPath.length)) {
      best = m;
    }
  }
  return best;
}

function volumeType(volume) {
  return Object.keys(volume ?? {}).find((k) => k !== "name");
}

function argValues(args, flag) {
  const out = [];
  (args ?? []).forEach((a, i) => {
    if (a === flag && i + 1 < args.length) out.push(args[i + 1]);
    else if (String(a).startsWith(flag + "=")) out.push(String(a).slice(flag.length + 1));
  });
  return out;
}

// Checks one pod spec holding the kcached sidecar.
function checkPod(report, subject, workload, pod, objects, kcachedFlags, workerFlags, variant) {
  const { spec, at, meta } = pod;
  const sidecar = spec.initContainers.find((c) => c.name === SIDECAR);
  const sc = `${at}.initContainers[${SIDECAR}]`;
  const volumes = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
  const apps = spec.containers ?? [];

  report.check(subject, `${sc} is a native sidecar (restartPolicy: Always)`,
    sidecar.restartPolicy === "Always" ? [] : [`${sc}.restartPolicy is ${JSON.stringify(sidecar.restartPolicy)}, want Always`]);

  const { problems, values } = checkArgs(sidecar.args ?? [], kcachedFlags, "kcached");
  report.check(subject, `${sc}.args are flags kcached accepts`, problems.map((p) => `${sc}.args: ${p}`));
  const one = (name) => flagValue(values, kcachedFlags, name);

  // Probe port: the probes, the named container port and the scrape annotation.
  const port = Number(one("--probe-port") ?? 0);
  const probeProblems = [];
  if (!port) probeProblems.push(`${sc}.args: --probe-port is not set (the gRPC probes need it)`);
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const p = sidecar[probe];
    if (!p) {
      probeProblems.push(`${sc}.${probe} is missing`);
    } else if (!p.grpc) {
      probeProblems.push(`${sc}.${probe} is not a grpc probe`);
    } else {
      if (p.grpc.port !== port) probeProblems.push(`${sc}.${probe}.grpc.port is ${JSON.stringify(p.grpc.port)}, --probe-port is ${port}`);
      if (p.grpc.service !== undefined && !HEALTH_SERVICES.includes(p.grpc.service)) {
        probeProblems.push(`${sc}.${probe}.grpc.service ${JSON.stringify(p.grpc.service)}: kcached's health service answers only ${HEALTH_SERVICES.map((s) => JSON.stringify(s)).join(" and ")}`);
      }
    }
  }
  const named = (sidecar.ports ?? []).filter((p) => p.name === "probe");
  if (named.length !== 1) {
    probeProblems.push(`${sc}.ports: want one port named probe, found ${named.length}`);
  } else if (named[0].containerPort !== port) {
    probeProblems.push(`${sc}.ports[probe].containerPort is ${JSON.stringify(named[0].containerPort)}, --probe-port is ${port}`);
  }
  const annotations = meta?.annotations ?? {};
  const metaAt = at.replace(/\.spec$/, ".metadata");
  if ("prometheus.io/port" in annotations) {
    if (annotations["prometheus.io/port"] !== String(port)) {
      probeProblems.push(`${metaAt}.annotations["prometheus.io/port"] is ${JSON.stringify(annotations["prometheus.io/port"])}, --probe-port is ${port}`);
    }
  } else if (annotations["prometheus.io/scrape"] === "true") {
    probeProblems.push(`${metaAt}.annotations: prometheus.io/scrape is "true" but prometheus.io/port is missing`);
  }
  report.check(subject, `probes, port "probe" and prometheus.io/port agree with --probe-port (${port})`, probeProblems);

  const address = one("--probe-address");
  report.check(subject, `--probe-address is ${PROBE_ADDRESS} (the kubelet probes the pod IP)`,
    address === PROBE_ADDRESS ? [] : [`${sc}.args: --probe-address is ${address}${values.has("--probe-address") ? "" : " (kcached's default)"}, want ${PROBE_ADDRESS}`]);

  // The socket: its folder is a volume both kcached and every app container mount there.
  const listen = one("--listen");
  const socketProblems = [];
  const m = /^unix:\/\/(\/.+)$/.exec(listen ?? "");
  if (!m) {
    socketProblems.push(`${sc}.args: --listen is ${JSON.stringify(listen)}, want unix:///<absolute path>`);
  } else {
    const dir = posix.dirname(posix.normalize(m[1]));
    const mount = (sidecar.volumeMounts ?? []).find((vm) => posix.normalize(vm.mountPath) === dir);
    if (!mount) {
      socketProblems.push(`${sc}.volumeMounts: the socket's folder ${dir} (--listen) is not a volumeMount of kcached`);
    } else {
      if (mount.readOnly) socketProblems.push(`${sc}.volumeMounts[${mount.name}] is readOnly: kcached cannot create the socket`);
      if (!volumes.has(mount.name)) socketProblems.push(`${at}.volumes: no volume ${mount.name} (mounted at ${dir})`);
      for (const app of apps) {
        const ca = `${at}.containers[${app.name}]`;
        const theirs = (app.volumeMounts ?? []).find((vm) => vm.name === mount.name);
        if (!theirs) {
          socketProblems.push(`${ca}.volumeMounts: does not mount ${mount.name}, the volume holding kcached's socket (${dir})`);
        } else if (posix.normalize(theirs.mountPath) !== dir) {
          socketProblems.push(`${ca}.volumeMounts[${mount.name}].mountPath is ${theirs.mountPath}, kcached's socket folder is ${dir}`);
        }
      }
    }
  }
  report.check(subject, `the socket folder of --listen (${listen}) is a volume kcached and the app containers share`, socketProblems);

  const addressProblems = [];
  for (const app of apps) {
    const ca = `${at}.containers[${app.name}]`;
    const env = (app.env ?? []).filter((e) => e.name === "KCACHE_ADDRESS");
    if (env.length === 0) addressProblems.push(`${ca}.env: no KCACHE_ADDRESS`);
    for (const e of env) {
      if (e.value !== listen) addressProblems.push(`${ca}.env[KCACHE_ADDRESS] is ${JSON.stringify(e.value)}, kcached --listen is ${listen}`);
    }
    for (const v of argValues(app.args, "--server")) {
      if (v !== listen) addressProblems.push(`${ca}.args: --server is ${v}, kcached --listen is ${listen}`);
    }
  }
  report.check(subject, "app containers' --server and KCACHE_ADDRESS equal kcached --listen", addressProblems);

  if (workerFlags) {
    const worker = apps.find((c) => c.name === "worker");
    const wp = worker ? checkArgs(worker.args ?? [], workerFlags, "the worker").problems : ["no container named worker"];
    report.check(subject, `${at}.containers[worker].args are flags the worker accepts`, wp.map((p) => `${at}.containers[worker].args: ${p}`));
  }

  // The store: on a writable volume. Baked stores: from the image, on no volume.
  const store = one("--store");
  const storeProblems = [];
  let storeVolume;
  if (store) {
    const mount = mountHolding(sidecar, store);
    storeVolume = mount && volumes.get(mount.name);
    if (!mount) {
      storeProblems.push(`${sc}.volumeMounts: --store ${store} is on no volume (the root filesystem is read-only or ephemeral)`);
    } else if (mount.readOnly) {
      storeProblems.push(`${sc}.volumeMounts[${mount.name}] holding --store ${store} is readOnly`);
    } else if (!storeVolume) {
      storeProblems.push(`${at}.volumes: no volume ${mount.name} (holding --store ${store})`);
    } else if (!WRITABLE_VOLUMES.includes(volumeType(storeVolume))) {
      storeProblems.push(`${at}.volumes[${mount.name}] holding --store ${store} is a ${volumeType(storeVolume)} volume, which is not writable`);
    }
  }
  report.check(subject, `--store (${store}) is on a writable volume`, storeProblems);

  // A claim is shared by every pod of a Deployment, and a store is opened by one kcached at a
  // time (RocksDB's lock): a second pod's kcached cannot start, so a rolling update that waits
  // for it never ends. One replica, and Recreate.
  const claim = storeVolume?.persistentVolumeClaim?.claimName;
  if (claim && ["Deployment", "ReplicaSet"].includes(workload.kind)) {
    const sharing = [];
    const replicas = workload.spec?.replicas ?? 1;
    if (replicas > 1) sharing.push(`spec.replicas is ${replicas}: every replica's kcached would open the store on claim ${claim}`);
    if (workload.kind === "Deployment" && workload.spec?.strategy?.type !== "Recreate") {
      sharing.push(`spec.strategy.type is ${workload.spec?.strategy?.type ?? "RollingUpdate (the default)"}, want Recreate: the new pod's kcached cannot open the store on claim ${claim} while the old pod's has it`);
    }
    report.check(subject, `the store on claim ${claim} is opened by one kcached at a time (one replica, strategy Recreate)`, sharing);
  }

  const baked = values.get("--baked") ?? [];
  const bakedProblems = [];
  for (const b of baked) {
    const mount = mountHolding(sidecar, b);
    if (mount) bakedProblems.push(`${sc}.args: --baked ${b} is on volume ${mount.name} (mounted at ${mount.mountPath}); baked stores come from the image`);
  }
  report.check(subject, `--baked (${baked.length ? baked.join(", ") : "none"}) is in the image, on no volume`, bakedProblems);

  const variantProblems = [];
  if (variant.noBaked && baked.length) variantProblems.push(`${sc}.args: a no-baked variant passes --baked ${baked.join(", ")}`);
  if (!variant.noBaked && !baked.length) variantProblems.push(`${sc}.args: no --baked (only no-baked variants may leave it out)`);
  if (variant.pvc) {
    const claim = storeVolume?.persistentVolumeClaim?.claimName;
    if (!claim) {
      variantProblems.push(`${at}.volumes: a pvc variant's store volume ${storeVolume?.name ?? "(none)"} is ${volumeType(storeVolume) ?? "missing"}, want persistentVolumeClaim`);
    } else if (!objects.some((o) => o.kind === "PersistentVolumeClaim" && o.metadata?.name === claim)) {
      variantProblems.push(`${at}.volumes[${storeVolume.name}].persistentVolumeClaim.claimName ${claim}: no PersistentVolumeClaim of that name is rendered here`);
    }
  }
  const says = [variant.pvc ? "store on a PVC" : null, variant.noBaked ? "no --baked" : "--baked"].filter(Boolean).join(", ");
  report.check(subject, `variant (by name): ${says}`, variantProblems);
}

// Renders one kustomization and runs every check on it.
export async function checkKustomization(report, dir, kcachedFlags, workerFlags) {
  const subject = show(resolve(dir));
  let items;
  try {
    items = render(dir);
  } catch (e) {
    if (!(e instanceof RenderError)) throw e;
    report.check(subject, "renders", [e.message]);
    return;
  }
  report.check(subject, `renders (${items.map((i) => objectName(i.object)).join(", ")})`, []);
  const objects = items.map((i) => i.object);
  for (const item of items) {
    const from = `${show(item.file)}${item.patches.length ? ` patched by ${item.patches.join(", ")}` : ""}`;
    const problems = await validateObject(item.object);
    report.check(`${subject}: ${objectName(item.object)}`, `valid ${item.object.apiVersion} ${item.object.kind} (kubernetes-models ${modelsVersion()}; from ${from})`,
      problems.map((p) => `${p.startsWith("/") ? "field " : ""}${p}`));
  }
  const pods = items
    .map((item) => ({ item, pod: podSpecOf(item.object) }))
    .filter(({ pod }) => pod?.spec?.initContainers?.some((c) => c.name === SIDECAR));
  report.check(subject, `a workload runs the ${SIDECAR} sidecar`, pods.length ? [] : [`no rendered workload has an initContainer named ${SIDECAR}`]);
  for (const { item, pod } of pods) {
    checkPod(report, `${subject}: ${objectName(item.object)}`, item.object, pod, objects, kcachedFlags, workerFlags, variantOf(dir));
  }
}

// ---- systemd ----

// Splits a unit file into {section: [{key, value, line}]}, joining continuation lines.
function parseUnit(text) {
  const sections = {};
  const comments = [];
  let section = null;
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i].trim();
    const lineNo = i + 1;
    if (line.startsWith("#") || line.startsWith(";")) {
      comments.push(line.slice(1).trim());
      continue;
    }
    if (!line) continue;
    while (line.endsWith("\\") && i + 1 < lines.length) {
      line = line.slice(0, -1) + " " + lines[++i].trim();
    }
    const s = /^\[(.+)\]$/.exec(line);
    if (s) {
      section = s[1];
      sections[section] ??= [];
      continue;
    }
    const eq = line.indexOf("=");
    if (eq < 0 || !section) continue;
    sections[section].push({ key: line.slice(0, eq).trim(), value: line.slice(eq + 1).trim(), line: lineNo });
  }
  return { sections, comments };
}

// systemd's command-line splitting: whitespace, with "double" and 'single' quotes.
function splitCommand(text) {
  const out = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  let m;
  while ((m = re.exec(text))) out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : m[2] ?? m[3]);
  return out;
}

export function checkSystemdUnit(report, file, kcachedFlags) {
  const subject = show(resolve(file));
  const { sections, comments } = parseUnit(readFileSync(file, "utf8"));
  const service = sections.Service ?? [];
  const get = (key) => service.filter((e) => e.key === key);
  const exec = get("ExecStart");
  if (exec.length !== 1) {
    report.check(subject, "[Service] ExecStart", [`want one ExecStart=, found ${exec.length}`]);
    return;
  }
  const argv = splitCommand(exec[0].value.replace(/^[-@:+!]+/, ""));
  const at = `[Service] ExecStart (line ${exec[0].line})`;
  const { problems, values } = checkArgs(argv.slice(1), kcachedFlags, "kcached");
  report.check(subject, `${at} flags are flags kcached accepts`, problems.map((p) => `${at}: ${p}`));
  const one = (name) => flagValue(values, kcachedFlags, name);

  // The comment names the socket and where health answers.
  const listen = one("--listen");
  const port = one("--probe-port");
  const address = one("--probe-address");
  const text = comments.join(" ");
  const commentSocket = /unix:\/\/\/[^\s"'(),;]+/.exec(text)?.[0].replace(/\.$/, "");
  const health = /health on (\[[^\]]+\]|[^\s:]+):([0-9]+)/i.exec(text);
  const commentProblems = [];
  if (!commentSocket) commentProblems.push("no comment names the socket (unix:///...)");
  else if (commentSocket !== listen) commentProblems.push(`the comment says the socket is ${commentSocket}, ${at} has --listen ${listen}`);
  if (!health) commentProblems.push('no comment says where health answers ("health on ADDRESS:PORT")');
  else {
    if (health[2] !== String(port)) commentProblems.push(`the comment says health is on port ${health[2]}, ${at} has --probe-port ${port}`);
    if (health[1] !== address) commentProblems.push(`the comment says health is on ${health[1]}, ${at} has --probe-address ${address}${values.has("--probe-address") ? "" : " (kcached's default)"}`);
  }
  report.check(subject, `socket (${listen}) and health (${address}:${port}) agree with the unit's comment`, commentProblems);

  // With ProtectSystem=strict only the unit's own directories (and ReadWritePaths) are writable.
  const strict = get("ProtectSystem").some((e) => e.value === "strict");
  const writable = [
    ...get("RuntimeDirectory").flatMap((e) => e.value.split(/\s+/).map((d) => `/run/${d}`)),
    ...get("StateDirectory").flatMap((e) => e.value.split(/\s+/).map((d) => `/var/lib/${d}`)),
    ...get("CacheDirectory").flatMap((e) => e.value.split(/\s+/).map((d) => `/var/cache/${d}`)),
    ...get("ReadWritePaths").flatMap((e) => e.value.split(/\s+/).map((d) => d.replace(/^[-+]+/, ""))),
  ].filter((d) => d && d !== "/run/" && d !== "/var/lib/");
  const under = (p) => writable.some((d) => p === d || p.startsWith(d.endsWith("/") ? d : d + "/"));
  const pathProblems = [];
  if (strict) {
    const socket = /^unix:\/\/(\/.+)$/.exec(listen ?? "")?.[1];
    if (socket && !under(posix.dirname(socket))) {
      pathProblems.push(`${at}: the socket folder ${posix.dirname(socket)} is not a RuntimeDirectory= (or ReadWritePaths=) and ProtectSystem=strict makes it read-only`);
    }
    const store = one("--store");
    if (store && !under(store)) {
      pathProblems.push(`${at}: --store ${store} is not under StateDirectory= (or ReadWritePaths=) and ProtectSystem=strict makes it read-only`);
    }
  }
  report.check(subject, `socket folder and --store are writable under ProtectSystem=${strict ? "strict" : "(not strict)"}`, pathProblems);
}
