// Self-tests of deploy/tools: the checks pass on deploy/ and fail, with the right message, on
// every broken fixture in tests/deploy/testdata; the renderer's JSON 6902 patching, the
// --help parser, pod-args.mjs and the yamllint configuration.
//
//   node tests/deploy/deploy_tools.test.mjs --kcached build/daemon/service/kcached
//   (or KCACHED=... node --test tests/deploy/)
// Needs deploy/tools/node_modules (scripts/install-deps.sh) and yamllint.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";
import { checkDeps } from "../../deploy/tools/lib/deps.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const tools = join(repo, "deploy/tools");
const testdata = join(here, "testdata");

const argi = process.argv.indexOf("--kcached");
const kcached = argi > 0 ? process.argv[argi + 1] : process.env.KCACHED;
if (!kcached) {
  process.stderr.write("error: pass --kcached PATH (or set KCACHED) to the kcached binary\n");
  process.exit(2);
}
const depsProblem = checkDeps();
if (depsProblem) {
  process.stderr.write(`error: ${depsProblem}\n`);
  process.exit(2);
}
const { checkKustomization, checkSystemdUnit, Report } = await import("../../deploy/tools/lib/checks.mjs");
const { readFlags, parseHelp, checkArgs } = await import("../../deploy/tools/lib/cliflags.mjs");
const { applyJsonPatch, PatchError, parseYamlFile, parseYamlText, render } = await import("../../deploy/tools/lib/kustomize.mjs");

const flags = readFlags(kcached);

function node(args, opts = {}) {
  const r = spawnSync(process.execPath, args, { cwd: repo, encoding: "utf8", ...opts });
  return { rc: r.status, out: r.stdout, err: r.stderr };
}

async function failures(run) {
  const lines = [];
  const report = new Report((l) => lines.push(l));
  await run(report);
  return { lines, fails: lines.filter((l) => l.startsWith("FAIL")) };
}

// Each fixture, and what its FAIL lines must say: every expected text appears, and every FAIL
// line holds one of them (so a fixture breaks one thing, and nothing else fails by accident).
const kustomizationCases = {
  "probe-port-mismatch": ["readinessProbe.grpc.port is 7071, --probe-port is 7070"],
  "probe-containerport-mismatch": ["ports[probe].containerPort is 7071, --probe-port is 7070"],
  "probe-annotation-mismatch": ['annotations["prometheus.io/port"] is "9090", --probe-port is 7070'],
  "probe-address-default": ["--probe-address is 127.0.0.1 (kcached's default), want 0.0.0.0"],
  "socket-dir-not-shared": ["containers[worker].volumeMounts[kcache-socket].mountPath is /run/other, kcached's socket folder is /run/kcache"],
  "socket-volume-not-mounted": ["containers[worker].volumeMounts: does not mount kcache-socket"],
  "socket-dir-not-a-mount": ["the socket's folder /run/kcache2 (--listen) is not a volumeMount of kcached"],
  "address-env-mismatch": ['env[KCACHE_ADDRESS] is "unix:///run/kcache/other.sock", kcached --listen is unix:///run/kcache/kcache.sock'],
  "server-arg-mismatch": ["args: --server is unix:///run/kcache/other.sock, kcached --listen is unix:///run/kcache/kcache.sock"],
  "unknown-flag": ["unknown flag --memory-cache: kcached --help does not list it (did you mean --memory-cache-mb?)"],
  "bad-flag-value": ["--log-level=verbose: not one of trace, debug, info, warn, error"],
  "missing-required-flag": ["--store is required by kcached and missing"],
  "not-native-sidecar": ["initContainers[kcached].restartPolicy is undefined, want Always"],
  "store-not-on-volume": ["--store /var/lib/kcache is on no volume"],
  "store-on-configmap": ["volumes[kcache-store] holding --store /var/lib/kcache is a configMap volume, which is not writable"],
  "baked-on-volume": ["--baked /opt/kcache/store is on volume tmp (mounted at /opt/kcache)"],
  "field-wrong-type": ["field /spec/template/spec/initContainers/0/ports/0/containerPort: must be integer", 'ports[probe].containerPort is "7070"'],
  "field-unknown": ['field /spec/template/spec/initContainers/0/readinesProbe: unknown field "readinesProbe" (did you mean "readinessProbe"?)', "readinessProbe is missing"],
  "field-missing-required": ["field /spec/template/spec/containers/0: must have required property name"],
  "unknown-kind": ["unknown kind: Widget in example.com/v1 is not a Kubernetes API type"],
  "no-sidecar": ["no rendered workload has an initContainer named kcached"],
  "pvc-store-on-emptydir": ["a pvc variant's store volume kcache-store is emptyDir, want persistentVolumeClaim"],
  "pvc-claim-missing": ["claimName kcache-store: no PersistentVolumeClaim of that name is rendered here"],
  "pvc-rolling-update": ["spec.replicas is 2: every replica's kcached would open the store on claim kcache-store", "spec.strategy.type is RollingUpdate (the default), want Recreate"],
  "no-baked-but-baked": ["a no-baked variant passes --baked /opt/kcache/store"],
  "baked-missing": ["no --baked (only no-baked variants may leave it out)"],
  // The renderer.
  "patch-bad-path": ["patch.json: on Deployment/inference: operation 0 (remove /spec/template/spec/initContainers/0/args/42): /spec/template/spec/initContainers/0/args/42: index 42 is out of range (the list at /spec/template/spec/initContainers/0/args has 8 items)"],
  "patch-test-fails": ['operation 0 (test /spec/template/spec/initContainers/0/args/1): test failed: the value is "--baked=/opt/kcache/store", the patch expects "--baked=/somewhere/else"'],
  "patch-bad-op": ['patches[0].patch: operation 0: op "merge" is not one of add, remove, replace, move, copy, test'],
  "patch-outside-root/inner": ["patches[0].path: ../patch.json is not in or below"],
  "unsupported-field": ['field "namePrefix" is not supported by this renderer'],
  "strategic-merge-patch": ["replicas.yaml: not a list of JSON 6902 operations (strategic merge patches are not supported)"],
  "target-selects-nothing": ['patches[0]: target {"kind":"Deployment","name":"inferense"} selects no resource'],
  "yaml-duplicate-key": ["deployment.yaml: YAML: Map keys must be unique at line 5, column 3"],
};

const systemdCases = {
  "unknown-flag.service": ["unknown flag --probe-prot: kcached --help does not list it", "the comment says health is on port 7070, [Service] ExecStart (line 7) has --probe-port 0"],
  "comment-port-mismatch.service": ["the comment says health is on port 7071, [Service] ExecStart (line 7) has --probe-port 7070"],
  "comment-socket-mismatch.service": ["the comment says the socket is unix:///run/kcache/kcached.sock, [Service] ExecStart (line 7) has --listen unix:///run/kcache/kcache.sock"],
  "store-not-writable.service": ["--store /srv/kcache is not under StateDirectory= (or ReadWritePaths=) and ProtectSystem=strict makes it read-only"],
  "socket-not-runtime-dir.service": ["the socket folder /run/kcache2 is not a RuntimeDirectory= (or ReadWritePaths=)"],
};

function assertFails(fails, expected, what) {
  assert.ok(fails.length > 0, `${what}: no check failed`);
  for (const e of expected) {
    assert.ok(fails.some((l) => l.includes(e)), `${what}: no FAIL line says: ${e}\nFAIL lines:\n${fails.join("\n")}`);
  }
  for (const l of fails) {
    assert.ok(expected.some((e) => l.includes(e)), `${what}: unexpected FAIL line:\n${l}`);
  }
}

test("deploy/ passes every check (validate.mjs, exit 0)", () => {
  const r = node([join(tools, "validate.mjs"), "--kcached", kcached]);
  assert.equal(r.rc, 0, r.out + r.err);
  assert.doesNotMatch(r.out, /^FAIL/m);
  for (const dir of ["deploy/k8s/base", "deploy/k8s/overlays/pvc", "deploy/k8s/overlays/no-baked", "deploy/k8s/overlays/pvc-no-baked", "deploy/systemd/kcached.service"]) {
    assert.match(r.out, new RegExp(`^ok   ${dir.replace(/[.]/g, "\\.")}: `, "m"), `no checks of ${dir}`);
  }
});

test("every fixture in testdata has expectations", () => {
  const dirs = readdirSync(testdata).filter((d) => statSync(join(testdata, d)).isDirectory() && !["systemd", "yamllint"].includes(d));
  for (const d of dirs) {
    const name = existsSync(join(testdata, d, "kustomization.yaml")) ? d : `${d}/inner`;
    assert.ok(name in kustomizationCases, `tests/deploy/testdata/${name} has no entry in kustomizationCases`);
  }
  for (const f of readdirSync(join(testdata, "systemd"))) assert.ok(f in systemdCases, `testdata/systemd/${f} has no entry in systemdCases`);
});

for (const [name, expected] of Object.entries(kustomizationCases)) {
  test(`fixture ${name} fails`, async () => {
    const { fails } = await failures((report) => checkKustomization(report, join(testdata, name), flags));
    assertFails(fails, expected, name);
  });
}

for (const [name, expected] of Object.entries(systemdCases)) {
  test(`systemd fixture ${name} fails`, async () => {
    const { fails } = await failures(async (report) => checkSystemdUnit(report, join(testdata, "systemd", name), flags));
    assertFails(fails, expected, name);
  });
}

test("validate.mjs exits 1 and prints FAIL lines on a broken kustomization", () => {
  const r = node([join(tools, "validate.mjs"), "--kcached", kcached, "--kustomization", join(testdata, "probe-port-mismatch")]);
  assert.equal(r.rc, 1, r.out + r.err);
  assert.match(r.out, /^FAIL tests\/deploy\/testdata\/probe-port-mismatch: Deployment\/inference: .*readinessProbe\.grpc\.port is 7071/m);
  assert.match(r.out, /^FAILED: \d+ checks passed, 1 failed$/m);
});

test("validate.mjs exits 2 without --kcached, or with one that does not run", () => {
  let r = node([join(tools, "validate.mjs")]);
  assert.equal(r.rc, 2);
  assert.match(r.err, /--kcached PATH is required/);
  r = node([join(tools, "validate.mjs"), "--kcached", "/nonexistent/kcached"]);
  assert.equal(r.rc, 2);
  assert.match(r.err, /cannot run \/nonexistent\/kcached --help: no such file/);
});

test("a flag renamed in kcached fails the real manifests", () => {
  const help = spawnSync(kcached, ["--help"], { encoding: "utf8" }).stdout;
  assert.match(help, /--probe-port/);
  const dir = mkdtempSync(join(tmpdir(), "kcache-deploy-"));
  try {
    writeFileSync(join(dir, "help.txt"), help.replace(/--probe-port/g, "--health-port"));
    const fake = join(dir, "kcached");
    writeFileSync(fake, `#!/bin/sh\ncat "${join(dir, "help.txt")}"\n`);
    chmodSync(fake, 0o755);
    const r = node([join(tools, "validate.mjs"), "--kcached", fake]);
    assert.equal(r.rc, 1, r.out + r.err);
    assert.match(r.out, /^FAIL deploy\/k8s\/base: .*unknown flag --probe-port: kcached --help does not list it/m);
    assert.match(r.out, /^FAIL deploy\/systemd\/kcached\.service: .*unknown flag --probe-port/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the tools say to run scripts/install-deps.sh when node_modules is missing", () => {
  const dir = mkdtempSync(join(tmpdir(), "kcache-deploy-"));
  try {
    for (const f of ["lib", "package.json", "package-lock.json", "validate.mjs", "pod-args.mjs", "render.mjs"]) {
      cpSync(join(tools, f), join(dir, f), { recursive: true });
    }
    for (const [script, args] of [["validate.mjs", ["--kcached", kcached]], ["pod-args.mjs", ["deploy/k8s/base", "kcached"]], ["render.mjs", ["deploy/k8s/base"]]]) {
      const r = node([join(dir, script), ...args]);
      assert.equal(r.rc, 2, `${script}: ${r.out}${r.err}`);
      assert.match(r.err, /node_modules has no kubernetes-models: run scripts\/install-deps\.sh/, script);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("pod-args.mjs prints a container's args one per line", () => {
  const [manifest] = parseYamlFile(join(repo, "deploy/k8s/base/deployment.yaml"));
  const want = manifest.spec.template.spec.initContainers.find((c) => c.name === "kcached").args;
  let r = node([join(tools, "pod-args.mjs"), "deploy/k8s/base", "kcached"]);
  assert.equal(r.rc, 0, r.err);
  assert.deepEqual(r.out.split("\n").slice(0, -1), want);
  r = node([join(tools, "pod-args.mjs"), "deploy/k8s/overlays/pvc-no-baked", "kcached"]);
  assert.equal(r.rc, 0, r.err);
  assert.deepEqual(r.out.split("\n").slice(0, -1), want.filter((a) => !a.startsWith("--baked")));
  r = node([join(tools, "pod-args.mjs"), "--command", "deploy/k8s/base", "worker"]);
  assert.equal(r.rc, 0, r.err);
  assert.equal(r.out.split("\n")[0], "/usr/local/bin/kcache-example-worker");
  r = node([join(tools, "pod-args.mjs"), "deploy/k8s/base", "kcache"]);
  assert.equal(r.rc, 1);
  assert.match(r.err, /no container or init container named kcache/);
  r = node([join(tools, "pod-args.mjs"), join(testdata, "patch-bad-path"), "kcached"]);
  assert.equal(r.rc, 1);
  assert.match(r.err, /index 42 is out of range/);
});

test("JSON 6902: add, remove, replace, move, copy, test", () => {
  const doc = { a: [1, 2], "b/c": { "d~e": 1 }, f: { g: null } };
  const out = applyJsonPatch(doc, [
    { op: "add", path: "/a/-", value: 3 },
    { op: "add", path: "/a/0", value: 0 },
    { op: "add", path: "/a/4", value: 4 },
    { op: "test", path: "/a", value: [0, 1, 2, 3, 4] },
    { op: "replace", path: "/b~1c/d~0e", value: 2 },
    { op: "copy", from: "/b~1c", path: "/h" },
    { op: "move", from: "/f/g", path: "/i" },
    { op: "remove", path: "/a/1" },
    { op: "test", path: "/h", value: { "d~e": 2 } },
  ]);
  assert.deepEqual(out, { a: [0, 2, 3, 4], "b/c": { "d~e": 2 }, f: {}, h: { "d~e": 2 }, i: null });
  assert.deepEqual(doc, { a: [1, 2], "b/c": { "d~e": 1 }, f: { g: null } }, "the input is not changed");
  assert.deepEqual(applyJsonPatch({ a: 1 }, [{ op: "replace", path: "", value: [1] }]), [1]);
  const fails = [
    [{ op: "remove", path: "/nope" }, /operation 0 \(remove \/nope\): \/nope does not exist/],
    [{ op: "replace", path: "/a/2", value: 1 }, /index 2 is out of range/],
    [{ op: "add", path: "/a/01", value: 1 }, /"01" is not an index/],
    [{ op: "add", path: "/x/y", value: 1 }, /\/x does not exist/],
    [{ op: "add", path: "a", value: 1 }, /must start with "\/"/],
    [{ op: "test", path: "/a", value: [1] }, /test failed: the value is \[1,2\], the patch expects \[1\]/],
    [{ op: "move", from: "/a", path: "/a/0" }, /cannot move \/a into itself/],
  ];
  for (const [op, message] of fails) {
    assert.throws(() => applyJsonPatch({ a: [1, 2] }, [op]), (e) => e instanceof PatchError && message.test(e.message), JSON.stringify(op));
  }
});

test("the renderer gives the objects of deploy/k8s, patched", () => {
  const base = render(join(repo, "deploy/k8s/base"));
  assert.deepEqual(base.map((i) => `${i.object.kind}/${i.object.metadata.name}`), ["Deployment/inference"]);
  const pvc = render(join(repo, "deploy/k8s/overlays/pvc-no-baked"));
  assert.deepEqual(pvc.map((i) => `${i.object.kind}/${i.object.metadata.name}`), ["Deployment/inference", "PersistentVolumeClaim/kcache-store"]);
  const spec = pvc[0].object.spec.template.spec;
  assert.deepEqual(spec.volumes.find((v) => v.name === "kcache-store"), { name: "kcache-store", persistentVolumeClaim: { claimName: "kcache-store" } });
  assert.ok(!spec.initContainers[0].args.some((a) => a.startsWith("--baked")));
});

test("the renderer agrees with kubectl kustomize, where kubectl is installed", (t) => {
  const probe = spawnSync("kubectl", ["kustomize", "--help"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    t.skip("no kubectl with kustomize here");
    return;
  }
  const dirs = ["deploy/k8s/base", "deploy/k8s/overlays/pvc", "deploy/k8s/overlays/no-baked", "deploy/k8s/overlays/pvc-no-baked"]
    .map((d) => join(repo, d))
    .concat(Object.keys(kustomizationCases).map((d) => join(testdata, d)));
  const sortKeys = (v) => (Array.isArray(v) ? v.map(sortKeys) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])])) : v);
  const canon = (objs) => objs.map((o) => JSON.stringify(sortKeys(o))).sort();
  for (const dir of dirs) {
    const k = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8" });
    let ours;
    try {
      ours = render(dir).map((i) => i.object);
    } catch {
      ours = null;
    }
    if (ours === null) {
      // Refusals of features kustomize has, and our stricter rule for an empty target.
      const stricter = ["unsupported-field", "strategic-merge-patch", "target-selects-nothing"].some((n) => dir.endsWith(n));
      if (!stricter) assert.notEqual(k.status, 0, `${dir}: we refuse it, kubectl kustomize renders it`);
      continue;
    }
    assert.equal(k.status, 0, `${dir}: we render it, kubectl kustomize fails: ${k.stderr}`);
    const theirs = parseYamlText(k.stdout, `kubectl kustomize ${dir}`);
    assert.deepEqual(canon(ours), canon(theirs), dir);
  }
});

test("the --help parser reads CLI11's option lines", () => {
  const f = parseHelp(`prog: does things
Usage: prog [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --store TEXT REQUIRED       Writable store
  --baked TEXT:DIR ...        Read-only store (repeatable)
  --probe-port INT:INT in [0 - 65535]=0
                              TCP port --not-a-flag here
  --no-toolkit                Serve only
  --memory-cache-mb UINT=256  Bound
  --log-level TEXT:{trace,debug,info,warn,error}=info
                              Level
`);
  assert.deepEqual([...f.keys()].sort(), ["--baked", "--help", "--log-level", "--memory-cache-mb", "--no-toolkit", "--probe-port", "--store", "-h"]);
  assert.equal(f.get("--store").required, true);
  assert.equal(f.get("--baked").repeatable, true);
  assert.equal(f.get("--no-toolkit").takesValue, false);
  assert.equal(f.get("--probe-port").default, "0");
  assert.deepEqual(f.get("--probe-port").range, [0, 65535]);
  assert.deepEqual(f.get("--log-level").choices, ["trace", "debug", "info", "warn", "error"]);
  const { problems, values } = checkArgs(["--store", "/s", "--baked=/a", "--baked=/b", "--no-toolkit", "--probe-port=70000", "--memory-cache-mb=x", "stray", "--store=/t"], f, "prog");
  assert.deepEqual(values.get("--baked"), ["/a", "/b"]);
  assert.deepEqual(problems.sort(), [
    "--memory-cache-mb=x: not an integer",
    "--probe-port=70000: out of range [0 - 65535]",
    "--store is given 2 times; prog takes it once",
    'unexpected argument "stray": prog takes no positional arguments',
  ]);
  assert.ok(flags.has("--probe-port") && flags.has("--listen"), "the real kcached --help parses");
});

test("yamllint with deploy/.yamllint refuses the bad fixtures", () => {
  const r0 = spawnSync("yamllint", ["--version"], { encoding: "utf8" });
  assert.ok(!r0.error, "yamllint is not installed: run scripts/install-deps.sh");
  const lint = (f) => spawnSync("yamllint", ["--strict", "-f", "parsable", "-c", join(repo, "deploy/.yamllint"), join(testdata, "yamllint", f)], { encoding: "utf8" });
  let r = lint("truthy.yaml");
  assert.notEqual(r.status, 0);
  assert.match(r.stdout, /truthy\.yaml:7:12: \[(error|warning)\] truthy value should be one of \[false, true\] \(truthy\)/);
  r = lint("indentation.yaml");
  assert.notEqual(r.status, 0);
  assert.match(r.stdout, /indentation\.yaml:4:4: .*wrong indentation: expected 2 but found 3 \(indentation\)/);
});
