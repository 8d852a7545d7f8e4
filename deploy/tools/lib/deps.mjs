// Checks that deploy/tools/node_modules holds what package-lock.json pins, before anything
// imports a package, so a missing install is one clear line instead of a module-not-found
// stack. Uses no package itself.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

export const toolsDir = dirname(dirname(fileURLToPath(import.meta.url)));

export function checkDeps() {
  const where = relative(process.cwd(), toolsDir) || ".";
  const fix = `run scripts/install-deps.sh (or: npm ci --prefix ${where} --no-audit --no-fund)`;
  const lock = JSON.parse(readFileSync(join(toolsDir, "package-lock.json"), "utf8"));
  const wanted = Object.keys(lock.packages[""].dependencies ?? {});
  for (const name of wanted) {
    const pinned = lock.packages[`node_modules/${name}`]?.version;
    const pkg = join(toolsDir, "node_modules", name, "package.json");
    if (!existsSync(pkg)) {
      return `${where}/node_modules has no ${name}: ${fix}`;
    }
    const installed = JSON.parse(readFileSync(pkg, "utf8")).version;
    if (pinned && installed !== pinned) {
      return `${where}/node_modules has ${name} ${installed}, package-lock.json pins ${pinned}: ${fix}`;
    }
  }
  return null;
}

// For the command-line entry points: exits 2 with the message when the install is missing.
export function requireDeps() {
  const problem = checkDeps();
  if (problem) {
    process.stderr.write(`error: ${problem}\n`);
    process.exit(2);
  }
}
