#!/usr/bin/env node
// Renders a kustomization (the subset deploy/k8s uses: resources and JSON 6902 patches; see
// lib/kustomize.mjs) and prints the objects as YAML documents, like `kubectl kustomize DIR`
// (resources in the order listed, keys as written). `--json` prints one JSON array instead.
//
//   node deploy/tools/render.mjs deploy/k8s/overlays/pvc
import { requireDeps } from "./lib/deps.mjs";

const args = process.argv.slice(2);
const json = args.includes("--json");
const dirs = args.filter((a) => a !== "--json");
if (dirs.length !== 1 || dirs[0].startsWith("-")) {
  process.stderr.write("usage: render.mjs [--json] KUSTOMIZATION_DIR\n");
  process.exit(2);
}
requireDeps();
const { render, RenderError } = await import("./lib/kustomize.mjs");
const { stringify } = await import("yaml");
try {
  const objects = render(dirs[0]).map((i) => i.object);
  if (json) process.stdout.write(JSON.stringify(objects, null, 2) + "\n");
  else process.stdout.write(objects.map((o) => stringify(o, { lineWidth: 0 })).join("---\n"));
} catch (e) {
  if (!(e instanceof RenderError)) throw e;
  process.stderr.write(`error: ${e.message}\n`);
  process.exit(1);
}
