#!/usr/bin/env node
// Checks deploy/: renders deploy/k8s/base and every overlay, validates every object against the
// Kubernetes API types, cross-checks the kcached sidecar with the daemon's real flags (from
// `kcached --help`) and with the rest of its pod, and checks the systemd unit's ExecStart.
// One line per check; exit 1 when any fails, 2 on a usage error.
//
//   node deploy/tools/validate.mjs --kcached build/daemon/service/kcached
//   node deploy/tools/validate.mjs --kcached K [--worker W] [--kustomization DIR]... [--systemd UNIT]...
import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { requireDeps, toolsDir } from "./lib/deps.mjs";

const usage = `usage: validate.mjs --kcached PATH [--worker PATH] [--kustomization DIR]... [--systemd UNIT]...
  --kcached PATH        the kcached binary; its --help gives the flags the manifests may use
  --worker PATH         also check the worker container's args against this binary's --help
  --kustomization DIR   check this kustomization (repeatable); its folder name sets the variant:
                        "pvc" in it: store on a PVC; "no-baked": no --baked; else --baked
  --systemd UNIT        check this systemd unit (repeatable)
Without --kustomization and --systemd: deploy/k8s/base, every deploy/k8s/overlays/*, and
deploy/systemd/*.service.`;

function parseArgs(argv) {
  const o = { kustomizations: [], units: [] };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].startsWith("--") && argv[i].includes("=") ? [argv[i].slice(0, argv[i].indexOf("=")), argv[i].slice(argv[i].indexOf("=") + 1)] : [argv[i], undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--kcached": o.kcached = value(); break;
      case "--worker": o.worker = value(); break;
      case "--kustomization": o.kustomizations.push(value()); break;
      case "--systemd": o.units.push(value()); break;
      case "-h": case "--help": process.stdout.write(usage + "\n"); process.exit(0);
      default: throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  if (!o.kcached) throw new Error("--kcached PATH is required");
  return o;
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`error: ${e.message}\n${usage}\n`);
  process.exit(2);
}
requireDeps();
const { Report, checkKustomization, checkSystemdUnit } = await import("./lib/checks.mjs");
const { readFlags, FlagsError } = await import("./lib/cliflags.mjs");

if (opts.kustomizations.length === 0 && opts.units.length === 0) {
  const deploy = resolve(toolsDir, "..");
  opts.kustomizations.push(join(deploy, "k8s", "base"));
  const overlays = join(deploy, "k8s", "overlays");
  for (const name of existsSync(overlays) ? readdirSync(overlays).sort() : []) {
    opts.kustomizations.push(join(overlays, name));
  }
  const systemd = join(deploy, "systemd");
  for (const name of existsSync(systemd) ? readdirSync(systemd).sort() : []) {
    if (name.endsWith(".service")) opts.units.push(join(systemd, name));
  }
}

let kcachedFlags;
let workerFlags;
try {
  kcachedFlags = readFlags(opts.kcached);
  if (opts.worker) workerFlags = readFlags(opts.worker);
} catch (e) {
  if (!(e instanceof FlagsError)) throw e;
  process.stderr.write(`error: ${e.message}\n`);
  process.exit(2);
}

const report = new Report();
for (const dir of opts.kustomizations) await checkKustomization(report, dir, kcachedFlags, workerFlags);
for (const unit of opts.units) checkSystemdUnit(report, unit, kcachedFlags);
process.stdout.write(`${report.failed ? "FAILED" : "passed"}: ${report.passed} checks passed, ${report.failed} failed\n`);
process.exit(report.failed ? 1 : 0);
