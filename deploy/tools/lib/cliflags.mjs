// The flags a CLI11 program accepts, read from its --help, and a check of an argument list
// against them, so a flag renamed or removed in the daemon fails the manifest checks.
import { execFileSync } from "node:child_process";

export class FlagsError extends Error {}

// Runs `binary --help` and parses the option lines CLI11 prints:
//   "  --probe-port INT:INT in [0 - 65535]=0"   "  --no-toolkit          Serve only: ..."
//   "  --store TEXT REQUIRED   Writable ..."     "  --baked TEXT:DIR ...  Read-only ..."
// The name and type column is separated from the description by two or more spaces.
// Returns Map(long name -> {takesValue, required, repeatable, default, choices, range}).
export function readFlags(binary) {
  let text;
  try {
    text = execFileSync(binary, ["--help"], { encoding: "utf8", timeout: 20000, stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    const why = e.code === "ENOENT" ? "no such file" : e.stderr?.toString().trim() || e.message;
    throw new FlagsError(`cannot run ${binary} --help: ${why}`);
  }
  return parseHelp(text, binary);
}

export function parseHelp(text, binary = "the program") {
  const flags = new Map();
  for (const line of text.split("\n")) {
    if (!/^ {1,4}-/.test(line)) continue;
    const head = line.trim().split(/\s{2,}/)[0];
    const first = head.split(/\s+/)[0];
    const rest = head.slice(first.length).trim();
    const info = {
      takesValue: rest !== "",
      required: /\bREQUIRED\b/.test(rest),
      repeatable: /(^|\s)\.\.\.(\s|$)/.test(rest),
      default: undefined,
      choices: undefined,
      range: undefined,
      integer: /^U?INT\b/.test(rest),
      type: rest,
    };
    const def = /=(\S+)\s*(REQUIRED|\.\.\.)?$/.exec(rest.replace(/\s+(REQUIRED|\.\.\.)$/, ""));
    if (def) info.default = def[1];
    const choices = /\{([^}]*)\}/.exec(rest);
    if (choices) info.choices = choices[1].split(",").map((s) => s.trim());
    const range = /in \[(-?[0-9.]+) - (-?[0-9.]+)\]/.exec(rest);
    if (range) info.range = [Number(range[1]), Number(range[2])];
    if (/^UINT\b/.test(rest) && !info.range) info.range = [0, Infinity];
    for (const name of first.split(",")) {
      if (name.startsWith("-")) flags.set(name, info);
    }
  }
  if (!flags.has("--help") && !flags.has("-h")) {
    throw new FlagsError(`${binary} --help printed no CLI11 option list (no --help line)`);
  }
  return flags;
}

function suggest(name, known) {
  const words = [...known].filter((k) => k.startsWith("--"));
  const near = words.filter((k) => k.includes(name.slice(2)) || name.includes(k.slice(2)));
  return near.length ? ` (did you mean ${near.join(" or ")}?)` : "";
}

// Checks args (as a container's `args:` or a unit's ExecStart after the program) against flags.
// Returns {problems: [string], values: Map(name -> [value, ...])}; a flag without a value has
// the value true.
export function checkArgs(args, flags, program) {
  const problems = [];
  const values = new Map();
  for (let i = 0; i < args.length; i++) {
    const arg = String(args[i]);
    if (!arg.startsWith("-") || arg === "-" || arg === "--") {
      problems.push(`unexpected argument ${JSON.stringify(arg)}: ${program} takes no positional arguments`);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq > 0 && arg.startsWith("--") ? arg.slice(0, eq) : arg;
    const inline = eq > 0 && arg.startsWith("--") ? arg.slice(eq + 1) : undefined;
    const info = flags.get(name);
    if (!info) {
      problems.push(`unknown flag ${name}: ${program} --help does not list it${suggest(name, flags.keys())}`);
      continue;
    }
    let value = true;
    if (info.takesValue) {
      if (inline !== undefined) {
        value = inline;
      } else if (i + 1 < args.length && !String(args[i + 1]).startsWith("--")) {
        value = String(args[++i]);
      } else {
        problems.push(`${name} needs a value (${info.type})`);
        continue;
      }
      if (info.choices && !info.choices.includes(value)) {
        problems.push(`${name}=${value}: not one of ${info.choices.join(", ")}`);
      }
      if (info.integer && !/^-?[0-9]+$/.test(value)) {
        problems.push(`${name}=${value}: not an integer`);
      } else if (info.range && (Number(value) < info.range[0] || Number(value) > info.range[1])) {
        problems.push(`${name}=${value}: out of range [${info.range[0]} - ${info.range[1]}]`);
      }
    } else if (inline !== undefined) {
      problems.push(`${name} takes no value (given ${JSON.stringify(inline)})`);
      continue;
    }
    if (!values.has(name)) values.set(name, []);
    values.get(name).push(value);
  }
  const seen = new Set();
  for (const [name, info] of flags) {
    if (seen.has(info)) continue;
    seen.add(info);
    const given = [...flags].filter(([, i]) => i === info).flatMap(([n]) => values.get(n) ?? []);
    if (info.required && given.length === 0) problems.push(`${name} is required by ${program} and missing`);
    if (!info.repeatable && given.length > 1) problems.push(`${name} is given ${given.length} times; ${program} takes it once`);
  }
  return { problems, values };
}

// The value of a flag: the last one given, else the default --help prints, else undefined.
export function flagValue(values, flags, name) {
  const given = values.get(name);
  if (given && given.length) return given[given.length - 1];
  return flags.get(name)?.default;
}
