#!/usr/bin/env bash
# Keeps deploy/Dockerfile from drifting from CI and from what deploy/k8s expects:
#   - the build stage's RUN steps call scripts/install-deps.sh and scripts/build.sh (what CI's
#     scripts/test.sh runs) and stage the binaries with `cmake --install ... --prefix /usr/local`;
#   - the runtime stage installs its packages only through scripts/install-runtime-deps.sh
#     (copied from the context), starts from the apt stage (not from the build stage), runs as
#     uid 10001 with kcached as its entrypoint;
#   - a warm stage runs `kcache warm --arch ... --store /opt/kcache/store .../manifest.yaml`
#     for 7.5,8.6,8.9 by default, and the runtime stage copies /opt/kcache from it;
#   - every script a RUN step names exists and is executable; every /usr/local/bin program the
#     Deployment runs is a program `cmake --install` puts in bin/.
#
#   image_dockerfile.sh SOURCE_DIR [BUILD_DIR]
# BUILD_DIR (optional): installed into a temporary prefix, to check the Deployment's programs
# against what `cmake --install` puts in bin/. KCACHE_DOCKERFILE overrides the Dockerfile
# checked (to show that the check fails).
set -euo pipefail
source_dir=${1:?usage: image_dockerfile.sh SOURCE_DIR [BUILD_DIR]}
build=${2:-}
dockerfile=${KCACHE_DOCKERFILE:-$source_dir/deploy/Dockerfile}
work=$(mktemp -d /tmp/kcache-image-dockerfile.XXXXXX)
trap 'rm -rf "$work"' EXIT
installed=
if [[ -n $build ]]; then
  cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; echo "FAIL: cmake --install $build" >&2; exit 1; }
  installed=$work/installed.txt
  (cd "$work/prefix" && find . -type f | sed 's#^\./##') >"$installed"
fi
python3 - "$source_dir" "$dockerfile" "$installed" <<'PY'
import os, re, shlex, sys

source_dir, dockerfile, installed_list = sys.argv[1], sys.argv[2], sys.argv[3]
errors = []
def check(cond, msg):
    if not cond:
        errors.append(msg)
    return cond

# Instructions, continuation lines joined, comments dropped; grouped by stage.
lines, cur = [], ""
for raw in open(dockerfile):
    s = raw.rstrip("\n")
    if not cur and (s.strip().startswith("#") or not s.strip()):
        continue
    if s.strip().startswith("#"):
        continue  # a comment inside a continued instruction
    if s.rstrip().endswith("\\"):
        cur += s.rstrip()[:-1] + " "
        continue
    lines.append((cur + s).strip())
    cur = ""
stages, order = {}, []
for line in lines:
    op, _, rest = line.partition(" ")
    op = op.upper()
    if op == "FROM":
        m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
        name = m.group(2) or f"stage{len(order)}"
        stages[name] = {"from": m.group(1), "ins": []}
        order.append(name)
    elif order:
        stages[order[-1]]["ins"].append((op, rest))
if not check(order, f"{dockerfile}: no FROM"):
    print("\n".join("FAIL: " + e for e in errors), file=sys.stderr); sys.exit(1)

def runs(stage):
    return [r for op, r in stages.get(stage, {"ins": []})["ins"] if op == "RUN"]
def commands(stage):
    """Every command of the stage's RUN steps, split on && ; | and newlines."""
    out = []
    for r in runs(stage):
        for part in re.split(r"&&|\|\||;|\|", r):
            if part.strip():
                out.append(part.strip())
    return out
def calls(stage, script, *args):
    for c in commands(stage):
        try:
            words = shlex.split(c)
        except ValueError:
            words = c.split()
        while words and "=" in words[0] and not words[0].startswith(("-", ".", "/")):
            words = words[1:]  # VAR=value prefixes
        if words and (words[0] == script or words[0].endswith("/" + script)) and all(a in words for a in args):
            return words[0]
    return None

# Build stage: the stage whose RUN steps build.
build = next((s for s in order if calls(s, "scripts/build.sh")), None)
check(build, "no RUN step calls ./scripts/build.sh (the build CI runs)")
if build:
    check(calls(build, "scripts/install-deps.sh"),
          f"stage {build}: no RUN step calls ./scripts/install-deps.sh (the packages CI installs)")
    check(calls(build, "scripts/install-runtime-deps.sh", "--dev"),
          f"stage {build}: no RUN step installs the CUDA packages with scripts/install-runtime-deps.sh --dev")
    check(any(re.search(r"cmake --install \S+ --prefix /usr/local\b", c) for c in commands(build)),
          f"stage {build}: the binaries are not staged with `cmake --install BUILD --prefix /usr/local`")
    check(not any("apt-get install" in c for c in commands(build)),
          f"stage {build}: apt-get install outside the scripts (add the package to a script instead)")

# Warm stage.
warm = None
for s in order:
    for c in commands(s):
        if re.search(r"\bkcache warm\b", c):
            warm = s
            check("--arch" in c and re.search(r"--store[ =]/opt/kcache/store\b", c)
                  and "/opt/kcache/manifest.yaml" in c,
                  f"stage {s}: `{c}` does not warm /opt/kcache/manifest.yaml into --store /opt/kcache/store")
check(warm, "no RUN step runs `kcache warm`")
arch = re.search(r"^ARG KCACHE_ARCH=(\S+)", open(dockerfile).read(), re.M)
check(arch and arch.group(1) == "7.5,8.6,8.9", "ARG KCACHE_ARCH does not default to 7.5,8.6,8.9")

# Runtime stage: the last one.
runtime = order[-1]
st = stages[runtime]
check(st["from"] not in (build, warm),
      f"runtime stage {runtime} starts FROM {st['from']}: it must start from the apt stage or debian:12, not carry the build")
script = calls(runtime, "scripts/install-runtime-deps.sh")
check(script, f"runtime stage {runtime}: no RUN step calls scripts/install-runtime-deps.sh")
if script:
    copied = [r for op, r in st["ins"] if op == "COPY" and r.split()[-1] == script and "scripts/install-runtime-deps.sh" in r.split()[:-1]]
    check(copied or script.startswith("./scripts/"),
          f"runtime stage {runtime}: {script} is not COPY'd from scripts/install-runtime-deps.sh")
check(not any("apt-get install" in c for c in commands(runtime)),
      f"runtime stage {runtime}: apt-get install outside scripts/install-runtime-deps.sh")
ins = st["ins"]
check(any(op == "USER" and r.split(":")[0] == "10001" for op, r in ins), f"runtime stage {runtime}: not USER 10001")
check(any(op == "ENTRYPOINT" and "/usr/local/bin/kcached" in r for op, r in ins),
      f"runtime stage {runtime}: ENTRYPOINT is not /usr/local/bin/kcached")
check(any(op == "COPY" and f"--from={build}" in r and re.search(r"/staging/usr/local/?\s+/usr/local/?$", r) for op, r in ins),
      f"runtime stage {runtime}: does not COPY --from={build} /staging/usr/local/ /usr/local/")
check(any(op == "COPY" and f"--from={warm}" in r and r.split()[-1].rstrip("/") == "/opt/kcache" and "--chown" not in r for op, r in ins),
      f"runtime stage {runtime}: does not COPY --from={warm} /opt/kcache (owned by root)")

# Every script a RUN step names exists and is executable.
for s in order:
    for c in commands(s):
        for w in c.split():
            m = re.match(r"^\.?/?(scripts/[\w.-]+\.sh)$", w)
            if m:
                p = os.path.join(source_dir, m.group(1))
                check(os.path.isfile(p) and os.access(p, os.X_OK), f"stage {s}: {w} is not an executable file of the repository")

# The programs the Deployment runs are installed into bin/.
deployment = os.path.join(source_dir, "deploy/k8s/base/deployment.yaml")
wanted = sorted(set(re.findall(r"/usr/local/bin/([\w.-]+)", open(deployment).read())))
check(wanted, f"{deployment}: names no /usr/local/bin program")
if installed_list:
    installed = {os.path.basename(l.strip()) for l in open(installed_list) if l.startswith("bin/")}
    for prog in wanted:
        check(prog in installed, f"{deployment} runs /usr/local/bin/{prog}; cmake --install does not install bin/{prog}")

if errors:
    print("\n".join("FAIL: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"OK: {dockerfile}: build stage {build} runs the CI scripts, warm stage {warm}, runtime stage {runtime} "
      f"(programs {', '.join(wanted)})")
PY
