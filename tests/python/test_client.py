"""kcache's Python client against a real kcached (conftest.py): resolve by source, id and name,
batches, errors, fail-open, the zero-copy buffer."""

from __future__ import annotations

import dataclasses
import struct
import subprocess
import sys

import pytest

import kcache

DEVICE = kcache.Device(8, 9, 13000)
FROM_STORE = {"daemon:memory", "daemon:local_store"}


def cubin_sm(data: bytes) -> int:
    """The SM a CUDA 13 cubin is for (ELF e_flags bits 8-15, NOTES-platform.md)."""
    assert data[:4] == b"\x7fELF"
    (e_flags,) = struct.unpack_from("<I", data, 48)
    return (e_flags >> 8) & 0xFF


def test_device_parse() -> None:
    assert kcache.Device.parse("8.9") == kcache.Device(8, 9)
    assert kcache.Device.parse("sm_89", 13000) == kcache.Device(8, 9, 13000)
    assert kcache.Device.parse("120") == kcache.Device(12, 0)
    assert str(kcache.Device(9, 0)) == "9.0" and kcache.Device(7, 5).arch == 75
    for bad in ("", "8", "sm_8.9", "eight.nine", "8.9.1"):
        with pytest.raises(ValueError):
            kcache.Device.parse(bad)


def test_manifest_is_read_by_the_library(manifest_kernels: dict) -> None:
    scale = manifest_kernels["scale"]
    assert scale.name_expressions == ("scale<float>", "scale<int>")
    assert scale.options == ("-std=c++17",) and scale.min_arch == 75
    assert "kcache_test::Mul" not in scale.headers and "Mul" in scale.headers["scale_common.cuh"]
    with pytest.raises(kcache.NotFound):
        kcache.load_manifest("/nonexistent/manifest.yaml")


def test_resolve_by_source_is_a_stored_hit(client: kcache.Client, manifest_kernels: dict) -> None:
    k = client.resolve(manifest_kernels["axpy"], DEVICE)
    assert k.served_from in FROM_STORE, k
    assert (k.kind, k.target, k.rule, k.needs_jit) == ("cubin", "sm_89", "exact_sass", False)
    assert len(k.kernel_id) == 64 and int(k.kernel_id, 16) >= 0
    assert k.name == "axpy" and k.reason and k.micros > 0
    assert k.toolkit is not None and k.toolkit.startswith("nvrtc-"), k.toolkit
    assert cubin_sm(bytes(k)) == 0x59
    assert b"axpy" in bytes(k)


def test_resolve_by_id_and_by_name_give_the_same_bytes(client: kcache.Client,
                                                       manifest_kernels: dict) -> None:
    by_source = client.resolve(manifest_kernels["scale"], "8.9")
    by_id = client.resolve_id(by_source.kernel_id, DEVICE)
    by_name = client.resolve_name("scale", DEVICE)
    assert bytes(by_id) == bytes(by_source) == bytes(by_name)
    assert by_id.kernel_id == by_name.kernel_id == by_source.kernel_id
    # A plain str: 64 lowercase hex digits is an id, anything else a name.
    assert client.resolve(by_source.kernel_id, DEVICE).kernel_id == by_source.kernel_id
    assert client.resolve("scale", DEVICE).kernel_id == by_source.kernel_id
    with pytest.raises(kcache.NotFound):
        client.resolve_name("no_such_kernel", DEVICE)
    with pytest.raises(kcache.NotFound):
        client.resolve_id("0" * 64, DEVICE)


def test_lowered_names_are_in_the_cubin(client: kcache.Client, manifest_kernels: dict) -> None:
    k = client.resolve(manifest_kernels["scale"], DEVICE)
    assert set(k.lowered_names) == {"scale<float>", "scale<int>"}
    for mangled in k.lowered_names.values():
        assert mangled.startswith("_Z") and mangled.encode() in bytes(k)
    assert k.lowered_names["scale<float>"] != k.lowered_names["scale<int>"]


def test_a_new_source_is_compiled_by_the_daemon(client: kcache.Client,
                                                manifest_kernels: dict) -> None:
    axpy = manifest_kernels["axpy"]
    fresh = dataclasses.replace(axpy, name="axpy_fast", options=("--use_fast_math",))
    k = client.resolve(fresh, DEVICE)
    assert (k.served_from, k.rule) == ("daemon:compile", "compiled")
    assert k.kernel_id != client.resolve(axpy, DEVICE).kernel_id
    again = client.resolve(fresh, DEVICE)
    assert again.served_from in FROM_STORE and bytes(again) == bytes(k)


@pytest.fixture(params=["batch_call", "loop"])
def batch_mode(request, monkeypatch) -> str:
    """resolve_many through kcache_resolve_many (the library built here has it), or through the
    per-kernel loop the package falls back to with a library that lacks it."""
    from kcache import _native

    if request.param == "batch_call":
        assert _native.has("kcache_resolve_many")
    else:
        real_has = _native.has
        monkeypatch.setattr(_native, "has",
                            lambda name: name != "kcache_resolve_many" and real_has(name))
    return request.param


def test_resolve_many_keeps_order_and_isolates_failures(client: kcache.Client,
                                                        manifest_kernels: dict,
                                                        batch_mode: str) -> None:
    axpy, scale = manifest_kernels["axpy"], manifest_kernels["scale"]
    batch = [
        axpy,                                                                   # hit
        dataclasses.replace(scale, name="scale_O",
                            options=("-std=c++17", f"-DKCACHE_TEST_{batch_mode}=1")),  # compile
        dataclasses.replace(axpy, name="refused", options=("-include", "/etc/passwd")),
        # below min_arch (a new source: min_arch is not part of the kernel id, and the daemon
        # serves what it stores under an id whatever range a request declares)
        dataclasses.replace(axpy, name="hopper_only", source=axpy.source + "// 9.0+\n",
                            min_arch=90),
        kcache.ByName("scale"),                                                # hit by name
        kcache.ById(client.resolve(axpy, DEVICE).kernel_id),                   # hit by id
    ]
    results = client.resolve_many(batch, DEVICE)
    assert len(results) == len(batch)
    hit, compiled, refused, below, by_name, by_id = results
    assert isinstance(hit, kcache.Kernel) and hit.served_from in FROM_STORE and hit.name == "axpy"
    assert isinstance(compiled, kcache.Kernel) and compiled.served_from == "daemon:compile"
    assert set(compiled.lowered_names) == {"scale<float>", "scale<int>"}
    assert isinstance(refused, kcache.InvalidArgument), refused
    assert "-include" in refused.reason
    assert isinstance(below, kcache.NotFound), below
    assert "minimum" in below.reason or "min" in below.reason
    assert isinstance(by_name, kcache.Kernel) and by_name.name == "scale"
    assert isinstance(by_id, kcache.Kernel) and bytes(by_id) == bytes(hit)
    arrived = sorted(i for i, _ in client.resolve_iter(batch[:2], DEVICE))
    assert arrived == [0, 1]
    assert client.resolve_many([], DEVICE) == []


def test_compile_error_carries_the_nvrtc_log(client: kcache.Client) -> None:
    broken = kcache.KernelSource(
        name="broken", source='extern "C" __global__ void broken() { undefined_thing(); }\n')
    with pytest.raises(kcache.CompileError) as caught:
        client.resolve(broken, DEVICE)
    e = caught.value
    assert e.code == 10 and e.code_name == "ABORTED"
    assert "undefined_thing" in e.log and "error" in e.log
    assert e.reason.startswith("compile of") and e.log in e.reason
    assert isinstance(e, kcache.Error)


def test_data_is_a_read_only_zero_copy_view(client: kcache.Client, manifest_kernels: dict) -> None:
    k = client.resolve(manifest_kernels["axpy"], DEVICE)
    view = k.data
    assert view.readonly and view.format == "B" and view.nbytes == len(k) > 0
    with pytest.raises(TypeError):
        view[0] = 0
    assert view is k.data  # the same view each time: nothing is copied per access
    copy = bytes(k)
    del k  # the view keeps the library's buffer alive
    assert view.tobytes() == copy


def test_fast_path_serves_stored_kernels_unless_turned_off(own_daemon,
                                                          manifest_kernels: dict) -> None:
    fast = kcache.Client(own_daemon.address, local_compile_fallback=False)
    grpc_only = kcache.Client(own_daemon.address, local_compile_fallback=False, fast_path=False)

    def fast_hits() -> int:
        return fast.stat()["counters"].get("fast.hits", 0)

    axpy = manifest_kernels["axpy"]
    over_grpc = grpc_only.resolve(axpy, DEVICE)
    assert fast_hits() == 0
    over_fast = fast.resolve(axpy, DEVICE)
    assert fast_hits() == 1
    assert bytes(over_fast) == bytes(over_grpc) and over_fast.data.readonly
    batch = fast.resolve_many([axpy, kcache.ByName("scale")], DEVICE)
    assert all(isinstance(k, kcache.Kernel) for k in batch), batch
    assert fast_hits() == 3


def test_fail_open_compiles_locally_when_the_daemon_dies(own_daemon, manifest_kernels: dict) -> None:
    client = kcache.Client(own_daemon.address, deadline=5.0, breaker_failures=1,
                           breaker_cooldown=60.0)
    axpy = manifest_kernels["axpy"]
    assert client.resolve(axpy, DEVICE).served_from in FROM_STORE
    own_daemon.kill()
    local = client.resolve(axpy, DEVICE)
    assert local.served_from == "local_compile" and not local.from_daemon
    assert (local.kind, local.target) == ("cubin", "sm_89") and cubin_sm(bytes(local)) == 0x59
    # By id there is no source to compile: the daemon is the only way.
    with pytest.raises(kcache.Unavailable):
        client.resolve_id(local.kernel_id, DEVICE)
    batch = client.resolve_many([axpy, kcache.ByName("axpy")], DEVICE)
    assert isinstance(batch[0], kcache.Kernel) and batch[0].served_from == "local_compile"
    assert isinstance(batch[1], kcache.Unavailable)


def test_no_daemon_and_no_fallback_is_unavailable(tmp_path, manifest_kernels: dict) -> None:
    address = f"unix://{tmp_path}/absent.sock"
    client = kcache.Client(address, local_compile_fallback=False, startup_grace=0)
    with pytest.raises(kcache.Unavailable) as caught:
        client.resolve(manifest_kernels["axpy"], DEVICE)
    assert address in caught.value.reason and caught.value.code == 14


def test_bad_options_are_refused() -> None:
    with pytest.raises(kcache.InvalidArgument):
        kcache.Client("unix:///tmp/x.sock", deadline=0)
    with pytest.raises(TypeError):
        kcache.Client("unix:///tmp/x.sock").resolve(42, DEVICE)  # type: ignore[arg-type]


def test_stat(client: kcache.Client) -> None:
    stats = client.stat()
    assert stats["toolkits"] and isinstance(stats["counters"], dict)
    assert stats["store_artifacts"] > 0


def test_detect_devices_without_a_driver_is_empty() -> None:
    # The toolkit's stub libcuda stands for "no driver" on any machine (docs/gpu-tests.md).
    stub = "/usr/local/cuda/lib64/stubs/libcuda.so"
    code = ("import kcache, json; d = kcache.detect_devices(); "
            "print(json.dumps([[x.sm_major, x.sm_minor] for x in d]))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "KCACHE_LIBCUDA": stub}, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    assert all(isinstance(d, kcache.Device) for d in kcache.detect_devices())
