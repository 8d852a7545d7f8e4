"""Self-tests of deploy/tools: the checks pass on deploy/ and fail, with the right message, on
every broken fixture in tests/deploy/testdata; the kustomize wrapper (kustomize's own errors,
the patch-target check), the schema validation, the --help parser, pod_args.py and the
yamllint configuration. Tests that render skip where neither kubectl nor kustomize is
installed (validate.py then exits 125 and says why)."""
import os
import shutil
import subprocess
import sys

import pytest

from kcache_deploy.checks import Report, check_kustomization, check_systemd_unit
from kcache_deploy.cliflags import check_args, parse_help, read_flags
from kcache_deploy.kustomize import RenderError, RendererMissing, parse_yaml_file, render, renderer
from kcache_deploy.schema import validate_object

from conftest import REPO

TOOLS = os.path.join(REPO, "deploy", "tools")
TESTDATA = os.path.join(REPO, "tests", "deploy", "testdata")

try:
    renderer()
    NO_RENDERER = None
except RendererMissing as e:
    NO_RENDERER = str(e)
needs_renderer = pytest.mark.skipif(NO_RENDERER is not None, reason=NO_RENDERER or "")


def tool(script, *args, env=None, python=sys.executable):
    r = subprocess.run([python, os.path.join(TOOLS, script), *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope="session")
def flags(kcached):
    return read_flags(kcached)


def failures(run):
    lines = []
    run(Report(lines.append))
    return [line for line in lines if line.startswith("FAIL")]


# Each fixture, and what its FAIL lines must say: every expected text appears, and every FAIL
# line holds one of them (so a fixture breaks one thing, and nothing else fails by accident).
KUSTOMIZATION_CASES = {
    "probe-port-mismatch": ["readinessProbe.grpc.port is 7071, --probe-port is 7070"],
    "probe-containerport-mismatch": ["ports[probe].containerPort is 7071, --probe-port is 7070"],
    "probe-annotation-mismatch": ['annotations["prometheus.io/port"] is "9090", --probe-port is 7070'],
    "probe-address-default": ["--probe-address is 127.0.0.1 (kcached's default), want 0.0.0.0"],
    "socket-dir-not-shared": ["containers[worker].volumeMounts[kcache-socket].mountPath is /run/other, kcached's socket folder is /run/kcache"],
    "socket-volume-not-mounted": ["containers[worker].volumeMounts: does not mount kcache-socket"],
    "socket-dir-not-a-mount": ["the socket's folder /run/kcache2 (--listen) is not a volumeMount of kcached"],
    "address-env-mismatch": ['env[KCACHE_ADDRESS] is "unix:///run/kcache/other.sock", kcached --listen is unix:///run/kcache/kcache.sock'],
    "server-arg-mismatch": ["args: --server is unix:///run/kcache/other.sock, kcached --listen is unix:///run/kcache/kcache.sock"],
    "unknown-flag": ["unknown flag --memory-cache: kcached --help does not list it (did you mean --memory-cache-max-bytes or --memory-cache-mb?)"],
    "bad-flag-value": ["--log-level=verbose: not one of trace, debug, info, warn, error"],
    "missing-required-flag": ["--store is required by kcached and missing"],
    "not-native-sidecar": ["initContainers[kcached].restartPolicy is undefined, want Always"],
    "store-not-on-volume": ["--store /var/lib/kcache is on no volume"],
    "store-on-configmap": ["volumes[kcache-store] holding --store /var/lib/kcache is a configMap volume, which is not writable"],
    "baked-on-volume": ["--baked /opt/kcache/store is on volume tmp (mounted at /opt/kcache)"],
    "field-wrong-type": ['field /spec/template/spec/initContainers/0/ports/0/containerPort: must be integer (is "7070")',
                         'ports[probe].containerPort is "7070"'],
    "field-unknown": ['field /spec/template/spec/initContainers/0/readinesProbe: unknown field "readinesProbe" (did you mean "readinessProbe"?)',
                      "readinessProbe is missing"],
    "field-missing-required": ["field /spec/template/spec/containers/0: must have required property name"],
    "unknown-kind": ["unknown kind: Widget in example.com/v1 is not a Kubernetes API type"],
    "no-sidecar": ["no rendered workload has an initContainer named kcached"],
    "pvc-store-on-emptydir": ["a pvc variant's store volume kcache-store is emptyDir, want persistentVolumeClaim"],
    "pvc-claim-missing": ["claimName kcache-store: no PersistentVolumeClaim of that name is rendered here"],
    "pvc-rolling-update": ["spec.replicas is 2: every replica's kcached would open the store on claim kcache-store",
                           "spec.strategy.type is RollingUpdate (the default), want Recreate"],
    "no-baked-but-baked": ["a no-baked variant passes --baked /opt/kcache/store"],
    "baked-missing": ["no --baked (only no-baked variants may leave it out)"],
    # What kustomize itself refuses, in its words.
    "patch-bad-path": ["renders: error in remove for path: '/spec/template/spec/initContainers/0/args/42': Unable to access invalid index: 42"],
    "patch-test-fails": ["renders: testing value /spec/template/spec/initContainers/0/args/1 failed: test failed"],
    "patch-bad-op": ["renders: Unexpected kind: merge"],
    "patch-outside-root/inner": ["patch-outside-root/patch.json' is not in or below"],
    "kustomization-unknown-field": ['renders: invalid Kustomization: json: unknown field "namePrefx"'],
    "yaml-duplicate-key": ['renders: map[string]interface {}(nil): yaml: unmarshal errors: line 5: mapping key "name" already defined at line 4'],
    # What kustomize merges: the strategic merge patch moved the readinessProbe.
    "strategic-merge-patch": ["readinessProbe.grpc.port is 7072, --probe-port is 7070"],
    # What kustomize allows and the checks do not: a patch applied to nothing.
    "target-selects-nothing": ['patches[0]: target {"kind":"Deployment","name":"inferense"} selects no resource'],
}

SYSTEMD_CASES = {
    "unknown-flag.service": ["unknown flag --probe-prot: kcached --help does not list it",
                             "the comment says health is on port 7070, [Service] ExecStart (line 7) has --probe-port 0"],
    "comment-port-mismatch.service": ["the comment says health is on port 7071, [Service] ExecStart (line 7) has --probe-port 7070"],
    "comment-socket-mismatch.service": ["the comment says the socket is unix:///run/kcache/kcached.sock, [Service] ExecStart (line 7) has --listen unix:///run/kcache/kcache.sock"],
    "store-not-writable.service": ["--store /srv/kcache is not under StateDirectory= (or ReadWritePaths=) and ProtectSystem=strict makes it read-only"],
    "socket-not-runtime-dir.service": ["the socket folder /run/kcache2 is not a RuntimeDirectory= (or ReadWritePaths=)"],
}


def assert_fails(fails, expected, what):
    assert fails, f"{what}: no check failed"
    for e in expected:
        assert any(e in line for line in fails), f"{what}: no FAIL line says: {e}\nFAIL lines:\n" + "\n".join(fails)
    for line in fails:
        assert any(e in line for e in expected), f"{what}: unexpected FAIL line:\n{line}"


@needs_renderer
def test_deploy_passes_every_check(kcached):
    rc, out, err = tool("validate.py", "--kcached", kcached)
    assert rc == 0, out + err
    assert "\nFAIL" not in "\n" + out
    for d in ("deploy/k8s/base", "deploy/k8s/overlays/pvc", "deploy/k8s/overlays/no-baked",
              "deploy/k8s/overlays/pvc-no-baked", "deploy/systemd/kcached.service"):
        assert f"\nok   {d}: " in "\n" + out, f"no checks of {d}"
    assert "rendering with kubectl kustomize" in out or "rendering with kustomize" in out or "KUSTOMIZE" in os.environ


def test_every_fixture_has_expectations():
    for d in sorted(os.listdir(TESTDATA)):
        if not os.path.isdir(os.path.join(TESTDATA, d)) or d in ("systemd", "yamllint"):
            continue
        name = d if os.path.exists(os.path.join(TESTDATA, d, "kustomization.yaml")) else f"{d}/inner"
        assert name in KUSTOMIZATION_CASES, f"tests/deploy/testdata/{name} has no entry in KUSTOMIZATION_CASES"
    for f in os.listdir(os.path.join(TESTDATA, "systemd")):
        assert f in SYSTEMD_CASES, f"testdata/systemd/{f} has no entry in SYSTEMD_CASES"
    # 34 kustomizations, 5 units and 2 yamllint files: every check has a fixture that breaks it.
    assert len(KUSTOMIZATION_CASES) + len(SYSTEMD_CASES) + len(os.listdir(os.path.join(TESTDATA, "yamllint"))) == 41


@needs_renderer
@pytest.mark.parametrize("name", sorted(KUSTOMIZATION_CASES))
def test_fixture_fails(name, flags):
    fails = failures(lambda r: check_kustomization(r, os.path.join(TESTDATA, name), flags))
    assert_fails(fails, KUSTOMIZATION_CASES[name], name)


@pytest.mark.parametrize("name", sorted(SYSTEMD_CASES))
def test_systemd_fixture_fails(name, flags):
    fails = failures(lambda r: check_systemd_unit(r, os.path.join(TESTDATA, "systemd", name), flags))
    assert_fails(fails, SYSTEMD_CASES[name], name)


@needs_renderer
def test_validate_exits_1_with_fail_lines_on_a_broken_kustomization(kcached):
    rc, out, err = tool("validate.py", "--kcached", kcached, "--kustomization",
                        os.path.join(TESTDATA, "probe-port-mismatch"))
    assert rc == 1, out + err
    assert any(line.startswith("FAIL tests/deploy/testdata/probe-port-mismatch: Deployment/inference: ")
               and "readinessProbe.grpc.port is 7071" in line for line in out.splitlines()), out
    assert any(line.startswith("FAILED: ") and line.endswith(" checks passed, 1 failed") for line in out.splitlines()), out


def test_validate_exits_2_without_kcached_or_with_one_that_does_not_run():
    rc, out, err = tool("validate.py")
    assert rc == 2
    assert "--kcached" in err and "required" in err
    rc, out, err = tool("validate.py", "--kcached", "/nonexistent/kcached")
    assert rc == 2
    assert "cannot run /nonexistent/kcached --help: no such file" in err


@needs_renderer
def test_a_flag_renamed_in_kcached_fails_the_real_manifests(kcached, tmp_path):
    help_text = subprocess.run([kcached, "--help"], capture_output=True, text=True).stdout
    assert "--probe-port" in help_text
    (tmp_path / "help.txt").write_text(help_text.replace("--probe-port", "--health-port"))
    fake = tmp_path / "kcached"
    fake.write_text(f"#!/bin/sh\ncat '{tmp_path / 'help.txt'}'\n")
    fake.chmod(0o755)
    rc, out, err = tool("validate.py", "--kcached", str(fake))
    assert rc == 1, out + err
    lines = out.splitlines()
    assert any(line.startswith("FAIL deploy/k8s/base: ") and
               "unknown flag --probe-port: kcached --help does not list it" in line for line in lines), out
    assert any(line.startswith("FAIL deploy/systemd/kcached.service: ") and
               "unknown flag --probe-port" in line for line in lines), out


def test_without_kustomize_validate_skips_rendering_and_still_checks_systemd(kcached):
    env = {k: v for k, v in os.environ.items() if k != "KUSTOMIZE"}
    env["PATH"] = "/nonexistent"
    rc, out, err = tool("validate.py", "--kcached", kcached, env=env)
    assert rc == 125, out + err
    assert "SKIP deploy/k8s/base: renders: no kustomize here: neither kubectl" in out, out
    assert "\nok   deploy/systemd/kcached.service: " in "\n" + out, out
    assert out.splitlines()[-1].startswith("skipped: "), out


def test_the_tools_say_to_run_install_deps_when_packages_are_missing(kcached):
    # Debian's python3 without its site folders: none of requirements/test.txt is there.
    bare = shutil.which("python3", path="/usr/bin") or sys.executable
    for script, args in (("validate.py", ["--kcached", kcached]),
                         ("pod_args.py", ["deploy/k8s/base", "kcached"]),
                         ("render.py", ["deploy/k8s/base"])):
        r = subprocess.run([bare, "-I", "-S", os.path.join(TOOLS, script), *args], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, f"{script}: {r.stdout}{r.stderr}"
        assert "has no kubernetes-validate (requirements/test.txt pins" in r.stderr, script
        assert "run scripts/install-deps.sh" in r.stderr, script


@needs_renderer
def test_pod_args_prints_a_container_s_args_one_per_line():
    (manifest,) = parse_yaml_file(os.path.join(REPO, "deploy/k8s/base/deployment.yaml"))
    want = next(c for c in manifest["spec"]["template"]["spec"]["initContainers"] if c["name"] == "kcached")["args"]
    rc, out, err = tool("pod_args.py", "deploy/k8s/base", "kcached")
    assert rc == 0, err
    assert out.split("\n")[:-1] == want
    rc, out, err = tool("pod_args.py", "deploy/k8s/overlays/pvc-no-baked", "kcached")
    assert rc == 0, err
    assert out.split("\n")[:-1] == [a for a in want if not a.startswith("--baked")]
    rc, out, err = tool("pod_args.py", "--command", "deploy/k8s/base", "worker")
    assert rc == 0, err
    assert out.split("\n")[0] == "/usr/local/bin/kcache-example-worker"
    rc, out, err = tool("pod_args.py", "deploy/k8s/base", "kcache")
    assert rc == 1
    assert "no container or init container named kcache" in err
    rc, out, err = tool("pod_args.py", os.path.join(TESTDATA, "patch-bad-path"), "kcached")
    assert rc == 1
    assert "Unable to access invalid index: 42" in err


@needs_renderer
def test_render_gives_the_objects_of_deploy_k8s_patched():
    base = render(os.path.join(REPO, "deploy/k8s/base"))
    assert [f"{o['kind']}/{o['metadata']['name']}" for o in base] == ["Deployment/inference"]
    pvc = render(os.path.join(REPO, "deploy/k8s/overlays/pvc-no-baked"))
    assert sorted(f"{o['kind']}/{o['metadata']['name']}" for o in pvc) == [
        "Deployment/inference", "PersistentVolumeClaim/kcache-store"]
    spec = next(o for o in pvc if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert next(v for v in spec["volumes"] if v["name"] == "kcache-store") == {
        "name": "kcache-store", "persistentVolumeClaim": {"claimName": "kcache-store"}}
    assert not any(a.startswith("--baked") for a in spec["initContainers"][0]["args"])


@needs_renderer
def test_patch_targets_are_selected_by_kustomize_s_own_rules(tmp_path):
    # A regular expression in the target's name selects, as under kustomize; a wrong kind does not.
    base = os.path.relpath(os.path.join(REPO, "deploy/k8s/base"), tmp_path)
    (tmp_path / "kustomization.yaml").write_text(f"""resources:
  - {base}
patches:
  - target: {{kind: Deployment, name: "infer.*"}}
    patch: '[{{"op": "replace", "path": "/spec/replicas", "value": 3}}]'
  - target: {{kind: StatefulSet, name: inference}}
    patch: '[{{"op": "replace", "path": "/spec/replicas", "value": 4}}]'
""")
    with pytest.raises(RenderError) as e:
        render(str(tmp_path))
    assert "patches[1]: target" in str(e.value) and '"kind":"StatefulSet"' in str(e.value)
    assert "patches[0]" not in str(e.value)


def test_schemas_are_those_of_the_kubernetes_version_asked_for():
    (deployment,) = parse_yaml_file(os.path.join(REPO, "deploy/k8s/base/deployment.yaml"))
    assert validate_object(deployment, "1.29") == []
    # Native sidecars (an init container's restartPolicy) came in 1.28: 1.27 refuses the field.
    problems = validate_object(deployment, "1.27")
    assert any(p.startswith("/spec/template/spec/initContainers/0/restartPolicy: unknown field") for p in problems), problems


def test_the_help_parser_reads_cli11_s_option_lines(flags):
    f = parse_help("""prog: does things
Usage: prog [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --store TEXT REQUIRED       Writable store
  --baked TEXT:DIR ...        Read-only store (repeatable)
  --probe-port INT:INT in [0 - 65535]=0
                              TCP port --not-a-flag here
  --no-toolkit                Serve only
  --memory-cache-max-bytes UINT:SIZE [b, kb(=1024b), ...]=268435456 Excludes: --memory-cache-mb
                              Bound
  --workers UINT=0            Workers
  --log-level TEXT:{trace,debug,info,warn,error}=info
                              Level
""")
    assert sorted(f) == ["--baked", "--help", "--log-level", "--memory-cache-max-bytes", "--no-toolkit",
                         "--probe-port", "--store", "--workers", "-h"]
    assert f["--memory-cache-max-bytes"].size and not f["--memory-cache-max-bytes"].integer
    assert f["--workers"].integer and not f["--workers"].size
    assert f["--store"].required
    assert f["--baked"].repeatable
    assert not f["--no-toolkit"].takes_value
    assert f["--probe-port"].default == "0"
    assert f["--probe-port"].range == (0, 65535)
    assert f["--log-level"].choices == ["trace", "debug", "info", "warn", "error"]
    problems, values = check_args(["--store", "/s", "--baked=/a", "--baked=/b", "--no-toolkit",
                                   "--probe-port=70000", "--memory-cache-max-bytes=x", "--workers=2MiB", "stray",
                                   "--store=/t"], f, "prog")
    assert values["--baked"] == ["/a", "/b"]
    assert sorted(problems) == [
        "--memory-cache-max-bytes=x: not a size (bytes, or a number and a unit: 512MiB, 8GiB)",
        "--probe-port=70000: out of range [0 - 65535]",
        "--store is given 2 times; prog takes it once",
        "--workers=2MiB: not an integer",
        'unexpected argument "stray": prog takes no positional arguments',
    ]
    for size in ("512MiB", "8GiB", "4096", "1.5G", "64kb"):
        assert check_args([f"--memory-cache-max-bytes={size}", "--store=/s"], f, "prog")[0] == [], size
    assert "--probe-port" in flags and "--listen" in flags, "the real kcached --help parses"


def test_yamllint_with_deploy_yamllint_refuses_the_bad_fixtures():
    assert shutil.which("yamllint"), "yamllint is not installed: run scripts/install-deps.sh"

    def lint(name):
        return subprocess.run(["yamllint", "--strict", "-f", "parsable", "-c",
                               os.path.join(REPO, "deploy/.yamllint"),
                               os.path.join(TESTDATA, "yamllint", name)], capture_output=True, text=True)
    r = lint("truthy.yaml")
    assert r.returncode != 0
    assert "truthy.yaml:7:12: [" in r.stdout and "truthy value should be one of [false, true] (truthy)" in r.stdout
    r = lint("indentation.yaml")
    assert r.returncode != 0
    assert "indentation.yaml:4:4: " in r.stdout and "wrong indentation: expected 2 but found 3 (indentation)" in r.stdout


def test_flashinfer_warm_says_what_is_missing(tmp_path):
    # An image without FlashInfer (a flashinfer package that fails to import stands in for
    # it, ahead of the installed one): the warm-up script says so and exits 2 (bad input)
    # instead of a traceback; with no generator named, argparse's usage error (2).
    absent = tmp_path / "flashinfer"
    absent.mkdir()
    (absent / "__init__.py").write_text('raise ImportError("No module named flashinfer")\n')
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    code, _, err = tool("flashinfer_warm.py", "gen_norm_module", env=env)
    assert code == 2
    assert "cannot import flashinfer.jit" in err and "install flashinfer-python" in err
    code, _, err = tool("flashinfer_warm.py", env=env)
    assert code == 2 and "GENERATOR" in err


def test_flashinfer_warm_refuses_a_generator_flashinfer_lacks():
    # With the pinned flashinfer-python (requirements/no-deps.txt): a name no module of
    # flashinfer.jit defines is bad input (2), named, before anything is built.
    code, _, err = tool("flashinfer_warm.py", "gen_norm_module", "gen_no_such_module")
    assert code == 2
    assert "flashinfer.jit has no generator 'gen_no_such_module'" in err
    assert "built" not in err
