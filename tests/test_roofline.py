"""greenlab.roofline: intensity arithmetic and the shape of a measured roofline (no timing asserted)."""

import pytest

from greenlab.techniques import roofline


def test_matmul_intensity_is_flops_over_bytes():
    # 2*n^3 FLOPs over 3 n^2 fp32 values: n/6 FLOP per byte
    assert roofline.matmul_intensity(512, 512, 512) == pytest.approx(512 / 6)
    assert roofline.matmul_intensity(512, 512, 512, 2) == pytest.approx(2 * 512 / 6)
    # a batch of one against a weight matrix: about 0.5 FLOP per byte in fp32, memory-bound
    assert roofline.matmul_intensity(1, 4096, 4096) == pytest.approx(2 * 4096 * 4096 / ((4096 + 4096 * 4096 + 4096) * 4))
    with pytest.raises(ValueError, match="m must be"):
        roofline.matmul_intensity(0, 1, 1)


def test_attainable_is_the_lower_roof():
    r = roofline.Roofline("test machine", "cpu", {"fp32": 100e9, "bf16": 400e9}, 10e9, 64, 1024)
    assert r.ridge_point() == pytest.approx(10.0)
    assert r.attainable(1.0) == pytest.approx(10e9) and r.bound(1.0) == "memory-bound"
    assert r.attainable(100.0) == pytest.approx(100e9) and r.bound(100.0) == "compute-bound"
    assert r.attainable(20.0, "bf16") == pytest.approx(200e9)  # bf16 helps only above fp32's ridge
    with pytest.raises(ValueError, match="dtype"):
        r.attainable(1.0, "fp16")
    with pytest.raises(ValueError, match="intensity"):
        r.attainable(0.0)


def test_measure_gives_positive_labelled_figures_and_plots():
    import matplotlib

    matplotlib.use("Agg")
    r = roofline.measure("cpu", dtypes=("fp32",), matmul_n=64, copy_bytes=2**16, min_seconds=0.01, rounds=1)
    assert r.peak_flops["fp32"] > 0 and r.bandwidth_bytes_per_s > 0
    assert r.machine and r.device == "cpu" and "measured on" in r.summary()
    ax = roofline.plot(r, points=[("matmul", 10.0, 1e9)])
    assert "measured on" in ax.get_title()
    with pytest.raises(ValueError, match="dtypes"):
        roofline.measure("cpu", dtypes=("int4",))


def test_seconds_per_call_is_positive_and_checks_arguments():
    assert roofline.seconds_per_call(lambda: sum(range(100)), "cpu", min_seconds=0.005, rounds=1) > 0
    with pytest.raises(ValueError, match="rounds"):
        roofline.seconds_per_call(lambda: None, "cpu", rounds=0)
