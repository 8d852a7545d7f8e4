#!/usr/bin/env node
// Prints the args of one container (or init container) of the workload a kustomization
// renders, one per line, so a script can start a program with the manifest's own flags:
//
//   mapfile -t args < <(node deploy/tools/pod-args.mjs deploy/k8s/base kcached)
//   build/daemon/service/kcached "${args[@]}"
//
// --kind/--name pick the workload when the kustomization renders more than one (default: the
// one workload holding a container of that name). --command prints the container's command
// first. Exit 1 when the kustomization does not render or the container is not found.
import { requireDeps } from "./lib/deps.mjs";

const usage = "usage: pod-args.mjs [--command] [--kind KIND] [--name NAME] KUSTOMIZATION_DIR CONTAINER";
const argv = process.argv.slice(2);
const opts = { command: false };
const positional = [];
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--command") opts.command = true;
  else if (a === "--kind" || a === "--name") {
    if (argv[i + 1] === undefined) { process.stderr.write(`error: ${a} needs a value\n${usage}\n`); process.exit(2); }
    opts[a.slice(2)] = argv[++i];
  } else if (a === "-h" || a === "--help") { process.stdout.write(usage + "\n"); process.exit(0); }
  else if (a.startsWith("-")) { process.stderr.write(`error: unknown option ${a}\n${usage}\n`); process.exit(2); }
  else positional.push(a);
}
if (positional.length !== 2) {
  process.stderr.write(`${usage}\n`);
  process.exit(2);
}
const [dir, name] = positional;
requireDeps();
const { render, RenderError, objectName } = await import("./lib/kustomize.mjs");

function podSpecs(obj) {
  if (obj.kind === "Pod") return obj.spec;
  if (obj.kind === "CronJob") return obj.spec?.jobTemplate?.spec?.template?.spec;
  return obj.spec?.template?.spec;
}

let objects;
try {
  objects = render(dir).map((i) => i.object);
} catch (e) {
  if (!(e instanceof RenderError)) throw e;
  process.stderr.write(`error: ${e.message}\n`);
  process.exit(1);
}
const found = [];
for (const obj of objects) {
  if (opts.kind && obj.kind !== opts.kind) continue;
  if (opts.name && obj.metadata?.name !== opts.name) continue;
  const spec = podSpecs(obj);
  for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
    if (c?.name === name) found.push({ obj, c });
  }
}
if (found.length !== 1) {
  const what = found.length ? `${found.length} containers named ${name} (${found.map((f) => objectName(f.obj)).join(", ")}); pick one with --kind/--name` : `no container or init container named ${name}`;
  process.stderr.write(`error: ${dir}: ${what}\n`);
  process.exit(1);
}
const { c } = found[0];
const lines = [...(opts.command ? c.command ?? [] : []), ...(c.args ?? [])].map(String);
for (const l of lines) {
  if (l.includes("\n")) {
    process.stderr.write(`error: an arg of ${name} holds a newline; one-per-line output cannot carry it\n`);
    process.exit(1);
  }
}
process.stdout.write(lines.map((l) => l + "\n").join(""));
