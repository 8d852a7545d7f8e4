// A small subset of kustomize, enough for deploy/k8s (Debian 12 packages neither kustomize nor
// kubectl): a kustomization.yaml with `resources:` (YAML files, or folders holding another
// kustomization) and `patches:` of JSON 6902 operations (from a file with `path:` or inline with
// `patch:`) applied to the resources a `target:` selects. Anything else in a kustomization is
// refused with an error rather than ignored, so an overlay can never render differently here
// than under kustomize without this failing.
//
// As kustomize does by default (LoadRestrictionsRootOnly), files (resource files, patch files)
// must lie in or below the kustomization's own folder; only folders of other kustomizations may
// be elsewhere. Stricter than kustomize: a patch whose target selects no resource is an error.
// Output order: resources in the order listed (kustomize's `sortOptions: fifo`).
import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";
import { parseAllDocuments } from "yaml";

export class RenderError extends Error {}

const KUSTOMIZATION_NAMES = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
const KUSTOMIZATION_FIELDS = new Set(["apiVersion", "kind", "resources", "patches"]);
const PATCH_FIELDS = new Set(["path", "patch", "target"]);
const TARGET_FIELDS = new Set(["group", "version", "kind", "name", "namespace"]);
const OPS = {
  add: ["value"],
  remove: [],
  replace: ["value"],
  move: ["from"],
  copy: ["from"],
  test: ["value"],
};

// Paths in messages: relative to the working folder when below it.
export function show(p) {
  const r = relative(process.cwd(), p);
  return r && !r.startsWith("..") ? r : p;
}

const firstLine = (message) => message.split("\n")[0].replace(/:$/, "");

// Parses every YAML document of a text as Kubernetes reads YAML (1.1: `on`/`yes` are booleans,
// 0660 is octal); duplicate keys and syntax errors are errors. Empty documents are dropped.
export function parseYamlText(text, where = "(text)") {
  const out = [];
  for (const doc of parseAllDocuments(text, { version: "1.1", prettyErrors: true })) {
    if (doc.errors.length) {
      throw new RenderError(`${where}: YAML: ${firstLine(doc.errors[0].message)}`);
    }
    const value = doc.toJS({ maxAliasCount: 100 });
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

export function parseYamlFile(file) {
  return parseYamlText(readFileSync(file, "utf8"), show(file));
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function kustomizationFile(dir) {
  const found = KUSTOMIZATION_NAMES.filter((n) => existsSync(join(dir, n)));
  if (found.length === 0) {
    throw new RenderError(`${show(dir)}: no kustomization.yaml in this folder`);
  }
  if (found.length > 1) {
    throw new RenderError(`${show(dir)}: more than one kustomization file (${found.join(", ")})`);
  }
  return join(dir, found[0]);
}

// A file a kustomization names: must exist and lie in or below the kustomization's folder.
function fileInRoot(root, kfile, field, rel) {
  const p = resolve(root, rel);
  if (!existsSync(p)) {
    throw new RenderError(`${show(kfile)}: ${field}: ${rel}: no such file or folder`);
  }
  const real = realpathSync(p);
  const realRoot = realpathSync(root);
  if (real !== realRoot && !real.startsWith(realRoot + sep)) {
    throw new RenderError(
      `${show(kfile)}: ${field}: ${rel} is not in or below ${show(root)} ` +
        "(kustomize refuses files outside the kustomization's folder; copy the file here)",
    );
  }
  return p;
}

export function resourceId(obj) {
  const group = String(obj.apiVersion ?? "").includes("/") ? obj.apiVersion.split("/")[0] : "";
  const ns = obj.metadata?.namespace ?? "";
  return `${group ? group + "/" : ""}${obj.kind}/${ns ? ns + "/" : ""}${obj.metadata?.name}`;
}

// A short name of a rendered object for messages: Kind/name.
export function objectName(obj) {
  return `${obj.kind}/${obj.metadata?.name}`;
}

// Renders the kustomization in `dir`. Returns [{object, file, patches}]: each rendered object,
// the file it came from and the patch files applied to it.
export function render(dir, stack = []) {
  const root = resolve(dir);
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new RenderError(`${show(root)}: not a folder`);
  }
  const real = realpathSync(root);
  if (stack.includes(real)) {
    throw new RenderError(`${show(root)}: kustomizations include each other in a cycle`);
  }
  const kfile = kustomizationFile(root);
  const docs = parseYamlFile(kfile);
  if (docs.length !== 1 || !isObject(docs[0])) {
    throw new RenderError(`${show(kfile)}: must hold one mapping`);
  }
  const k = docs[0];
  for (const field of Object.keys(k)) {
    if (!KUSTOMIZATION_FIELDS.has(field)) {
      throw new RenderError(
        `${show(kfile)}: field "${field}" is not supported by this renderer ` +
          `(supported: ${[...KUSTOMIZATION_FIELDS].join(", ")}); extend deploy/tools/lib/kustomize.mjs`,
      );
    }
  }
  if (k.apiVersion !== undefined && k.apiVersion !== "kustomize.config.k8s.io/v1beta1") {
    throw new RenderError(`${show(kfile)}: apiVersion ${k.apiVersion} is not supported`);
  }
  if (k.kind !== undefined && k.kind !== "Kustomization") {
    throw new RenderError(`${show(kfile)}: kind ${k.kind} is not supported (only Kustomization)`);
  }

  const out = [];
  const ids = new Map();
  const resources = k.resources ?? [];
  if (!Array.isArray(resources)) throw new RenderError(`${show(kfile)}: resources: must be a list`);
  for (const rel of resources) {
    if (typeof rel !== "string") {
      throw new RenderError(`${show(kfile)}: resources: entries must be strings`);
    }
    if (/^[a-z]+:\/\//i.test(rel) || rel.startsWith("git@")) {
      throw new RenderError(`${show(kfile)}: resources: ${rel}: remote resources are not supported`);
    }
    const p = resolve(root, rel);
    let items;
    if (existsSync(p) && statSync(p).isDirectory()) {
      items = render(p, [...stack, real]);
    } else {
      const file = fileInRoot(root, kfile, "resources", rel);
      items = parseYamlFile(file).map((object, i) => {
        if (!isObject(object)) {
          throw new RenderError(`${show(file)}: document ${i + 1} is not a mapping`);
        }
        for (const f of ["apiVersion", "kind"]) {
          if (typeof object[f] !== "string" || !object[f]) {
            throw new RenderError(`${show(file)}: document ${i + 1} has no ${f}`);
          }
        }
        if (object.kind === "List" || object.kind.endsWith("List")) {
          throw new RenderError(`${show(file)}: ${object.kind} objects are not supported`);
        }
        if (typeof object.metadata?.name !== "string" || !object.metadata.name) {
          throw new RenderError(`${show(file)}: ${object.kind} in document ${i + 1} has no metadata.name`);
        }
        return { object, file, patches: [] };
      });
    }
    for (const item of items) {
      const id = resourceId(item.object);
      if (ids.has(id)) {
        throw new RenderError(
          `${show(kfile)}: ${id} comes twice (from ${show(ids.get(id))} and ${show(item.file)})`,
        );
      }
      ids.set(id, item.file);
      out.push(item);
    }
  }

  const patches = k.patches ?? [];
  if (!Array.isArray(patches)) throw new RenderError(`${show(kfile)}: patches: must be a list`);
  patches.forEach((entry, n) => {
    const where = `${show(kfile)}: patches[${n}]`;
    if (!isObject(entry)) throw new RenderError(`${where}: must be a mapping`);
    for (const f of Object.keys(entry)) {
      if (!PATCH_FIELDS.has(f)) {
        throw new RenderError(
          `${where}: field "${f}" is not supported (supported: ${[...PATCH_FIELDS].join(", ")})`,
        );
      }
    }
    if ((entry.path === undefined) === (entry.patch === undefined)) {
      throw new RenderError(`${where}: needs exactly one of path and patch`);
    }
    let source;
    let ops;
    if (entry.path !== undefined) {
      const file = fileInRoot(root, kfile, `patches[${n}].path`, String(entry.path));
      source = show(file);
      ops = parsePatchText(readFileSync(file, "utf8"), source, file.endsWith(".json"));
    } else {
      source = `${where}.patch`;
      ops = parsePatchText(String(entry.patch), source, false);
    }
    checkOps(ops, source);
    if (!isObject(entry.target)) {
      throw new RenderError(`${where}: a JSON 6902 patch needs a target`);
    }
    for (const f of Object.keys(entry.target)) {
      if (!TARGET_FIELDS.has(f)) {
        throw new RenderError(
          `${where}: target field "${f}" is not supported (supported: ${[...TARGET_FIELDS].join(", ")})`,
        );
      }
    }
    const selected = out.filter((item) => selects(entry.target, item.object));
    if (selected.length === 0) {
      throw new RenderError(`${where}: target ${JSON.stringify(entry.target)} selects no resource`);
    }
    for (const item of selected) {
      try {
        item.object = applyJsonPatch(item.object, ops);
      } catch (e) {
        if (!(e instanceof PatchError)) throw e;
        throw new RenderError(`${source}: on ${objectName(item.object)}: ${e.message}`);
      }
      item.patches = [...item.patches, source];
    }
  });
  return out;
}

function parsePatchText(text, source, json) {
  let value;
  if (json) {
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new RenderError(`${source}: JSON: ${e.message}`);
    }
  } else {
    const docs = parseAllDocuments(text, { version: "1.1" });
    if (docs.length !== 1) throw new RenderError(`${source}: must hold one document`);
    if (docs[0].errors.length) throw new RenderError(`${source}: YAML: ${firstLine(docs[0].errors[0].message)}`);
    value = docs[0].toJS();
  }
  if (!Array.isArray(value)) {
    throw new RenderError(
      `${source}: not a list of JSON 6902 operations (strategic merge patches are not supported)`,
    );
  }
  return value;
}

function checkOps(ops, source) {
  ops.forEach((op, i) => {
    const where = `${source}: operation ${i}`;
    if (!isObject(op)) throw new RenderError(`${where}: must be an object`);
    const needs = OPS[op.op];
    if (!needs) {
      throw new RenderError(`${where}: op ${JSON.stringify(op.op)} is not one of ${Object.keys(OPS).join(", ")}`);
    }
    if (typeof op.path !== "string") throw new RenderError(`${where} (${op.op}): path must be a string`);
    for (const f of needs) {
      if (!(f in op)) throw new RenderError(`${where} (${op.op} ${op.path}): needs "${f}"`);
    }
    for (const f of Object.keys(op)) {
      if (f !== "op" && f !== "path" && !needs.includes(f)) {
        throw new RenderError(`${where} (${op.op} ${op.path}): unexpected field "${f}"`);
      }
    }
  });
}

function anchored(pattern, value) {
  return new RegExp(`^(?:${pattern})$`).test(value ?? "");
}

function selects(target, obj) {
  const [group, version] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : ["", obj.apiVersion];
  if (target.group !== undefined && !anchored(target.group, group)) return false;
  if (target.version !== undefined && !anchored(target.version, version)) return false;
  if (target.kind !== undefined && !anchored(target.kind, obj.kind)) return false;
  if (target.name !== undefined && !anchored(target.name, obj.metadata?.name)) return false;
  if (target.namespace !== undefined && !anchored(target.namespace, obj.metadata?.namespace)) return false;
  return true;
}

// ---- RFC 6902 JSON Patch over RFC 6901 JSON Pointers ----

export class PatchError extends Error {}

function parsePointer(ptr) {
  if (ptr === "") return [];
  if (!ptr.startsWith("/")) throw new PatchError(`path ${JSON.stringify(ptr)} must start with "/"`);
  return ptr
    .slice(1)
    .split("/")
    .map((t) => {
      if (/~[^01]|~$/.test(t)) throw new PatchError(`path ${ptr}: bad escape in "${t}"`);
      return t.replace(/~1/g, "/").replace(/~0/g, "~");
    });
}

function pointerOf(tokens) {
  return tokens.length ? "/" + tokens.map((t) => t.replace(/~/g, "~0").replace(/\//g, "~1")).join("/") : "";
}

function arrayIndex(arr, token, tokens, i, allowEnd) {
  if (!/^(0|[1-9][0-9]*)$/.test(token)) {
    throw new PatchError(`${pointerOf(tokens.slice(0, i + 1))}: "${token}" is not an index of the list at ${pointerOf(tokens.slice(0, i)) || "/"}`);
  }
  const n = Number(token);
  if (n > arr.length || (n === arr.length && !allowEnd)) {
    throw new PatchError(
      `${pointerOf(tokens.slice(0, i + 1))}: index ${n} is out of range (the list at ${pointerOf(tokens.slice(0, i)) || "/"} has ${arr.length} items)`,
    );
  }
  return n;
}

// The container holding the last token, which must exist.
function parentOf(doc, tokens) {
  let cur = doc;
  for (let i = 0; i < tokens.length - 1; i++) {
    const t = tokens[i];
    if (Array.isArray(cur)) {
      cur = cur[arrayIndex(cur, t, tokens, i, false)];
    } else if (isObject(cur)) {
      if (!Object.prototype.hasOwnProperty.call(cur, t)) {
        throw new PatchError(`${pointerOf(tokens)}: ${pointerOf(tokens.slice(0, i + 1))} does not exist`);
      }
      cur = cur[t];
    } else {
      throw new PatchError(`${pointerOf(tokens)}: ${pointerOf(tokens.slice(0, i)) || "/"} is not an object or a list`);
    }
  }
  if (!Array.isArray(cur) && !isObject(cur)) {
    throw new PatchError(`${pointerOf(tokens)}: ${pointerOf(tokens.slice(0, -1)) || "/"} is not an object or a list`);
  }
  return cur;
}

function getAt(doc, tokens) {
  if (tokens.length === 0) return doc;
  const parent = parentOf(doc, tokens);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) return parent[arrayIndex(parent, last, tokens, tokens.length - 1, false)];
  if (!Object.prototype.hasOwnProperty.call(parent, last)) {
    throw new PatchError(`${pointerOf(tokens)} does not exist`);
  }
  return parent[last];
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

const clone = (v) => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

function addAt(doc, tokens, value) {
  if (tokens.length === 0) return value;
  const parent = parentOf(doc, tokens);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    const i = last === "-" ? parent.length : arrayIndex(parent, last, tokens, tokens.length - 1, true);
    parent.splice(i, 0, value);
  } else {
    parent[last] = value;
  }
  return doc;
}

function removeAt(doc, tokens) {
  if (tokens.length === 0) throw new PatchError("cannot remove the whole document");
  const parent = parentOf(doc, tokens);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    parent.splice(arrayIndex(parent, last, tokens, tokens.length - 1, false), 1);
  } else {
    if (!Object.prototype.hasOwnProperty.call(parent, last)) {
      throw new PatchError(`${pointerOf(tokens)} does not exist`);
    }
    delete parent[last];
  }
  return doc;
}

// Applies the operations to a copy of doc and returns it; the first failing operation throws
// PatchError naming its index, op and path, and doc is left as it was.
export function applyJsonPatch(doc, ops) {
  let out = clone(doc);
  ops.forEach((op, i) => {
    const where = `operation ${i} (${op.op} ${op.path})`;
    try {
      const tokens = parsePointer(op.path);
      switch (op.op) {
        case "add":
          out = addAt(out, tokens, clone(op.value));
          break;
        case "remove":
          out = removeAt(out, tokens);
          break;
        case "replace":
          getAt(out, tokens);
          if (tokens.length === 0) {
            out = clone(op.value);
          } else {
            const parent = parentOf(out, tokens);
            const last = tokens[tokens.length - 1];
            parent[Array.isArray(parent) ? Number(last) : last] = clone(op.value);
          }
          break;
        case "move": {
          const from = parsePointer(op.from);
          if (tokens.length > from.length && pointerOf(tokens.slice(0, from.length)) === pointerOf(from)) {
            throw new PatchError(`cannot move ${op.from} into itself`);
          }
          const value = getAt(out, from);
          out = removeAt(out, from);
          out = addAt(out, tokens, value);
          break;
        }
        case "copy":
          out = addAt(out, tokens, clone(getAt(out, parsePointer(op.from))));
          break;
        case "test": {
          const actual = getAt(out, tokens);
          if (!deepEqual(actual, op.value)) {
            throw new PatchError(`test failed: the value is ${JSON.stringify(actual)}, the patch expects ${JSON.stringify(op.value)}`);
          }
          break;
        }
        default:
          throw new PatchError(`unknown op ${JSON.stringify(op.op)}`);
      }
    } catch (e) {
      if (e instanceof PatchError) throw new PatchError(`${where}: ${e.message}`);
      throw e;
    }
  });
  return out;
}
