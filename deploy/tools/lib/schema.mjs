// Validates rendered objects against the Kubernetes API types of the kubernetes-models package:
// the object's class (looked up by apiVersion and kind; an unknown kind is an error) and its
// validate() (types, required fields, enums, formats), plus a check for unknown fields
// (kubernetes-models' schemas allow them, the API server's strict field validation, which
// `kubectl apply` uses, does not: a misspelt `readinesProbe` must fail here too). The field
// lists come from the package's TypeScript declarations, which list every field of every type.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { toolsDir } from "./deps.mjs";

const modelsDir = join(toolsDir, "node_modules", "kubernetes-models");
const nodeModules = join(toolsDir, "node_modules");

export function modelsVersion() {
  return JSON.parse(readFileSync(join(modelsDir, "package.json"), "utf8")).version;
}

// The class of apiVersion/kind, or an error string.
async function modelClass(apiVersion, kind) {
  const gv = String(apiVersion);
  if (!/^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(gv) || !/^[A-Z][A-Za-z0-9]*$/.test(String(kind))) {
    return { error: `apiVersion ${JSON.stringify(apiVersion)} kind ${JSON.stringify(kind)} is not a Kubernetes type name` };
  }
  const unknown = {
    error: `unknown kind: ${kind} in ${gv} is not a Kubernetes API type (kubernetes-models ${modelsVersion()})`,
  };
  const dts = join(modelsDir, gv, `${kind}.d.ts`);
  if (!existsSync(dts)) return unknown;
  const mod = await import(`kubernetes-models/${gv}/${kind}`);
  const cls = mod[kind];
  if (typeof cls !== "function" || cls.kind !== kind || cls.apiVersion !== gv) return unknown;
  return { cls, dts };
}

// ---- field lists from the .d.ts files ----

const files = new Map(); // path -> {imports: Map(name -> {file, name}), types: Map(name -> expr), interfaces: Map(name -> Map(field -> expr))}

function dtsPath(fromFile, spec) {
  const base = spec.replace(/\.(m?js)$/, "");
  if (spec.startsWith(".")) return resolve(dirname(fromFile), base) + ".d.ts";
  const p = join(nodeModules, base) + ".d.ts";
  return existsSync(p) ? p : null; // a bare package (@kubernetes-models/base): no fields of ours there
}

// Splits `text` at `sep` characters that are outside brackets, quotes and angle brackets.
function splitTop(text, sep) {
  const parts = [];
  let depth = 0;
  let quote = null;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote && text[i - 1] !== "\\") quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if ("{<([".includes(c)) {
      depth++;
    } else if ("}>)]".includes(c)) {
      depth--;
    } else if (c === sep && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

function matchingBrace(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}" && --depth === 0) return i;
  }
  throw new Error("unbalanced braces");
}

function loadFile(file) {
  if (files.has(file)) return files.get(file);
  const text = readFileSync(file, "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/^\s*\/\/.*$/gm, "");
  const info = { imports: new Map(), types: new Map(), interfaces: new Map() };
  for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"([^"]+)"/g)) {
    const target = dtsPath(file, m[2]);
    for (const part of m[1].split(",").map((s) => s.trim()).filter(Boolean)) {
      const [orig, local] = part.split(/\s+as\s+/);
      info.imports.set((local ?? orig).trim(), target ? { file: target, name: orig.trim() } : null);
    }
  }
  for (const m of text.matchAll(/export\s+interface\s+(\w+)[^{]*\{/g)) {
    const open = m.index + m[0].length - 1;
    const body = text.slice(open + 1, matchingBrace(text, open));
    const fields = new Map();
    for (const member of splitTop(body, ";")) {
      const fm = /^"?([^"?:]+)"?\??\s*:\s*([\s\S]+)$/.exec(member);
      if (!fm) throw new Error(`${file}: cannot read member ${member}`);
      fields.set(fm[1], fm[2].trim());
    }
    info.interfaces.set(m[1], fields);
  }
  for (const m of text.matchAll(/export\s+declare\s+type\s+(\w+)\s*=\s*([^;]+);/g)) {
    info.types.set(m[1], m[2].trim());
  }
  for (const m of text.matchAll(/export\s*\{([^}]*)\}\s*;/g)) {
    for (const part of m[1].split(",").map((s) => s.trim()).filter(Boolean)) {
      const [orig, alias] = part.split(/\s+as\s+/);
      if (alias) info.types.set(alias.trim(), orig.trim());
    }
  }
  files.set(file, info);
  return info;
}

const LEAF = { leaf: true };
const nodes = new Map(); // `${file}#${name}` -> node

// The node of a type expression in `file`: {leaf}, {array: node}, {map: node}, or
// {fields: Map(field -> () => node)} (lazy, for recursive types).
function typeNode(file, expr) {
  expr = expr.trim();
  let m;
  if ((m = /^Array<([\s\S]+)>$/.exec(expr))) return { array: typeNode(file, m[1]) };
  if ((m = /^\{\s*\[\w+:\s*string\]:\s*([\s\S]+?);?\s*\}$/.exec(expr))) return { map: typeNode(file, m[1]) };
  const union = splitTop(expr, "|");
  if (union.length > 1) {
    const parts = union.map((p) => typeNode(file, p)).filter((n) => n !== LEAF);
    return parts.length === 1 ? parts[0] : LEAF; // `X | null`: X; mixed unions: not checked
  }
  if (/^(string|number|boolean|any|unknown|object|null|undefined|true|false|"[^"]*"|-?[0-9.]+)$/.test(expr)) return LEAF;
  if (/^\w+$/.test(expr)) return named(file, expr);
  return LEAF; // anything else (intersections, indexed access types): not checked
}

function named(file, name) {
  const key = `${file}#${name}`;
  if (nodes.has(key)) return nodes.get(key);
  const info = loadFile(file);
  let node = LEAF;
  if (info.interfaces.has(name)) {
    const fields = new Map();
    node = { fields };
    nodes.set(key, node);
    for (const [field, expr] of info.interfaces.get(name)) {
      let cached;
      fields.set(field, () => (cached ??= typeNode(file, expr)));
    }
    return node;
  }
  nodes.set(key, LEAF); // guards alias cycles
  if (info.types.has(name)) {
    node = typeNode(file, info.types.get(name));
  } else if (info.imports.has(name)) {
    const imp = info.imports.get(name);
    node = imp ? named(imp.file, imp.name) : LEAF;
  }
  nodes.set(key, node);
  return node;
}

function closest(word, candidates) {
  const dist = (a, b) => {
    const d = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let prev = d[0];
      d[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const tmp = d[j];
        d[j] = Math.min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = tmp;
      }
    }
    return d[b.length];
  };
  let best = null;
  for (const c of candidates) {
    const n = dist(word.toLowerCase(), c.toLowerCase());
    if (n <= Math.max(2, Math.floor(c.length / 4)) && (!best || n < best.n)) best = { c, n };
  }
  return best?.c;
}

function unknownFields(value, node, path, out) {
  if (node.array && Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, node.array, `${path}/${i}`, out));
  } else if (node.map && value && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) unknownFields(v, node.map, `${path}/${k}`, out);
  } else if (node.fields && value && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) {
      const field = node.fields.get(k);
      if (field) {
        unknownFields(v, field(), `${path}/${k}`, out);
      } else {
        const hint = closest(k, node.fields.keys());
        out.push(`${path}/${k}: unknown field "${k}"${hint ? ` (did you mean "${hint}"?)` : ""}`);
      }
    }
  }
}

// Validates one object. Returns a list of problems, each "<json pointer>: <what>".
export async function validateObject(obj) {
  const found = await modelClass(obj.apiVersion, obj.kind);
  if (found.error) return [found.error];
  const problems = [];
  try {
    new found.cls(obj).validate();
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    for (const err of e.errors) {
      const allowed = err.keyword === "enum" ? ` ${JSON.stringify(err.params.allowedValues)}` : "";
      problems.push(`${err.instancePath || "/"}: ${err.message}${allowed}`);
    }
  }
  unknownFields(obj, named(found.dts, `I${obj.kind}`), "", problems);
  return problems;
}

// For the self-test: every top-level kind's declarations parse.
export function loadAllKinds(list) {
  for (const [gv, kind] of list) named(join(modelsDir, gv, `${kind}.d.ts`), `I${kind}`);
}
