"""A node's GPUs from Python, without a GPU: pretend nodes resolved in one call (one artifact per
distinct SM), the load check of kcache.check_runs_on and kcache.load (refused before cuda.core or
CuPy is touched), entry points, and detection on a machine without a driver."""

from __future__ import annotations

import pytest

import kcache

NODES = [("7.5", "8.6"), ("8.9", "9.0"), ("9.0", "10.0"), ("8.9", "8.9")]


def pretend(sms) -> list:
    return kcache.pretend_gpus([kcache.Device.parse(sm, 13000) for sm in sms])


@pytest.mark.parametrize("sms", NODES, ids=["+".join(n) for n in NODES])
def test_each_gpu_gets_its_own_sms_artifact_once_per_distinct_sm(
        client: kcache.Client, manifest_kernels: dict, sms) -> None:
    gpus = pretend(sms)
    node = kcache.resolve_for_gpus(client, [manifest_kernels["axpy"], manifest_kernels["scale"]],
                                   gpus)
    assert [str(d) for d in node.devices] == list(dict.fromkeys(sms))
    assert len(node.kernels) == len(set(sms))
    for g, gpu in enumerate(gpus):
        kernels = node.for_gpu(g)
        assert [k.target for k in kernels] == [f"sm_{gpu.device.arch}"] * 2, kernels
        for k in kernels:
            kcache.check_runs_on(k, gpu)  # its own GPU: no error
        for other in gpus:
            if other.device.arch == gpu.device.arch:
                assert node.for_gpu(other.ordinal) is kernels
                continue
            with pytest.raises(kcache.FailedPrecondition) as refused:
                kcache.check_runs_on(kernels[0], other)
            assert (f"axpy is sm_{gpu.device.arch} SASS; GPU {other.ordinal} is {other.name} "
                    f"(sm_{other.device.arch}): resolve it for {other.device}") in refused.value.reason


def test_load_refuses_a_wrong_sm_before_any_library_loads_it(client: kcache.Client,
                                                             manifest_kernels: dict) -> None:
    k = client.resolve(manifest_kernels["axpy"], kcache.Device(8, 9, 13000))
    h100 = kcache.Gpu(0, kcache.Device(9, 0, 13000), "NVIDIA H100")
    for via in ("cuda.core", "cupy"):
        with pytest.raises(kcache.FailedPrecondition) as refused:
            kcache.load(k, h100, via=via)
        assert refused.value.reason.startswith(
            "axpy is sm_89 SASS; GPU 0 is NVIDIA H100 (sm_90): resolve it for 9.0"), refused.value
    # A driver older than the artifact needs is refused as well.
    old_driver = kcache.Gpu(0, kcache.Device(8, 9, 12000), "L4")
    with pytest.raises(kcache.FailedPrecondition, match="update the driver"):
        kcache.check_runs_on(k, old_driver)


def test_entry_points_are_the_extern_c_and_lowered_names(client: kcache.Client,
                                                         manifest_kernels: dict) -> None:
    axpy = client.resolve(manifest_kernels["axpy"], "8.9")
    assert kcache.entry_points(axpy) == ["axpy"]
    scale = client.resolve(manifest_kernels["scale"], "8.9")
    assert sorted(kcache.entry_points(scale)) == sorted(scale.lowered_names.values())


def test_detection_without_a_gpu_is_empty_and_resolving_for_the_node_says_so(
        client: kcache.Client, manifest_kernels: dict) -> None:
    if kcache.detect_gpus():
        pytest.skip("this machine has a GPU")
    assert kcache.detect_devices() == []
    with pytest.raises(kcache.NotFound, match="pretend_gpus"):
        kcache.resolve_for_gpus(client, [manifest_kernels["axpy"]])


def test_detected_gpus_are_labelled() -> None:
    gpus = kcache.detect_gpus()
    if not gpus:
        pytest.skip("no GPU")
    assert [g.ordinal for g in gpus] == list(range(len(gpus)))
    assert all(g.device.arch >= 75 and g.name for g in gpus)
