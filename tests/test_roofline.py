"""greenlab.roofline: intensity arithmetic and the shape of a measured roofline (no timing asserted)."""

import pytest

from greenlab.techniques import roofline


def test_matmul_intensity_is_flops_over_bytes():
    # 2*n^3 FLOPs over 3 n^2 fp32 values: n/6 FLOP per byte
    assert roofline.matmul_intensity(512, 512, 512) == pytest.approx(512 / 6)
    assert roofline.matmul_intensity(512, 512, 512, 2) == pytest.approx(2 * 512 / 6)
    # a batch of one against a weight matrix: about 0.5 FLOP per byte in fp32, memory-bound
    assert roofline.matmul_intensity(1, 4096, 4096) == pytest.approx(
        2 * 4096 * 4096 / ((4096 + 4096 * 4096 + 4096) * 4))
    with pytest.raises(ValueError, match="m must be"):
        roofline.matmul_intensity(0, 1, 1)


def test_attainable_is_the_lower_roof():
    r = roofline.Roofline("test machine", "cpu", {"fp32": 100e9, "bf16": 400e9}, 10e9, 64, 1024)
    assert r.ridge_point() == pytest.approx(10.0)
    assert r.attainable(1.0) == pytest.approx(10e9) and r.bound(1.0) == "memory-bound"
    assert r.attainable(100.0) == pytest.approx(100e9) and r.bound(100.0) == "compute-bound"
    assert r.attainable(20.0, "bf16") == pytest.approx(200e9)  # bf16 helps only above fp32's ridge
    # time floor: the slower of the two roofs
    assert r.floor_seconds(100e9, 1e9) == pytest.approx(1.0) and r.floor_seconds(1e9, 10e9) == pytest.approx(1.0)
    assert r.floor_seconds(400e9, 1e9, "bf16") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="bytes_moved"):
        r.floor_seconds(1.0, -1.0)
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


def test_the_summary_names_the_sizes_and_threads_its_peak_depends_on():
    import torch

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = roofline.measure("cpu", dtypes=("fp32",), matmul_n=32, copy_bytes=2**14, min_seconds=0.005, rounds=1)
    finally:
        torch.set_num_threads(threads)
    other = roofline.measure("cpu", dtypes=("fp32",), matmul_n=48, copy_bytes=2**14, min_seconds=0.005, rounds=1)
    assert "32x32 matmul; threads: 1" in one.summary()
    assert f"48x48 matmul; threads: {threads}" in other.summary()
    assert "other roofs" in one.summary()


def test_seconds_per_call_is_positive_and_checks_arguments():
    assert roofline.seconds_per_call(lambda: sum(range(100)), "cpu", min_seconds=0.005, rounds=1) > 0
    with pytest.raises(ValueError, match="rounds"):
        roofline.seconds_per_call(lambda: None, "cpu", rounds=0)


def test_count_is_exact_for_a_convolution_a_depthwise_one_and_a_linear_layer():
    import torch

    x = torch.randn(8, 16, 14, 14)
    conv = torch.nn.Conv2d(16, 32, 3, padding=1)
    depthwise = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
    linear = torch.nn.Linear(64, 128)
    rows = torch.randn(4, 64)
    with torch.no_grad():
        c = roofline.count(lambda: conv(x))
        d = roofline.count(lambda: depthwise(x))
        lin = roofline.count(lambda: linear(rows))
    # 2 FLOPs per multiply-add; input, weight, bias read once, output written once, 4 bytes each
    assert c == roofline.Counts(2 * 8 * 32 * 16 * 9 * 196, 4 * (x.numel() + 32 * 16 * 9 + 32 + 8 * 32 * 196))
    assert d == roofline.Counts(2 * 8 * 16 * 9 * 196, 4 * (2 * x.numel() + 16 * 9))
    assert lin == roofline.Counts(2 * 4 * 64 * 128, 4 * (4 * 64 + 64 * 128 + 128 + 4 * 128))
    # a depthwise filter does k^2 multiply-adds per value it reads: far below the dense conv's intensity
    assert d.intensity == pytest.approx(2 * 9 * 8 * 16 * 196 / (4 * (2 * x.numel() + 144)))
    assert d.intensity < 2.5 < 40 < c.intensity


def test_count_moves_no_bytes_for_views_and_counts_element_wise_work_as_bytes_only():
    import torch

    x = torch.randn(64, 32)
    assert roofline.count(lambda: x.t()[:10].unsqueeze(0)) == roofline.Counts(0, 0)
    assert roofline.count(lambda: torch.relu(x)) == roofline.Counts(0, 2 * x.numel() * 4)
    assert roofline.count(lambda: x.mul_(1.0)) == roofline.Counts(0, 2 * x.numel() * 4)  # read x, write x
    assert roofline.Counts(0, 0).intensity == 0.0
    with pytest.raises(TypeError, match="fn must be"):
        roofline.count(3)


def test_zeros_in_a_dense_weight_change_neither_flops_nor_bytes_and_fewer_channels_do():
    import torch

    x = torch.randn(16, 8, 10, 10)
    dense = torch.nn.Conv2d(8, 16, 3, padding=1)
    zeroed = torch.nn.Conv2d(8, 16, 3, padding=1)
    thin = torch.nn.Conv2d(8, 8, 3, padding=1)
    with torch.no_grad():
        zeroed.weight.mul_((torch.rand_like(zeroed.weight) > 0.5).float())
        counts = [roofline.count(lambda m=m: m(x)) for m in (dense, zeroed, thin)]
    assert counts[0] == counts[1]
    assert counts[2].flops == counts[0].flops // 2 and counts[2].bytes < counts[0].bytes


def test_batch_raises_the_intensity_of_a_weight_read_once():
    import torch

    layer = torch.nn.Linear(256, 256, bias=False)
    with torch.no_grad():
        one, eight = (roofline.count(lambda x=x: layer(x)) for x in (torch.zeros(1, 256), torch.zeros(8, 256)))
    assert one.intensity == pytest.approx(roofline.matmul_intensity(1, 256, 256))
    assert eight.intensity == pytest.approx(roofline.matmul_intensity(8, 256, 256))
    assert eight.intensity > 7 * one.intensity
    # the same tensor as both operands is read once
    a = torch.randn(16, 16)
    assert roofline.count(lambda: a @ a) == roofline.Counts(2 * 16 ** 3, 2 * 16 * 16 * 4)


def test_place_gives_a_point_with_counted_work_and_measured_time():
    import matplotlib
    import torch

    matplotlib.use("Agg")
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    p = roofline.place("matmul", lambda: a @ b, "cpu", min_seconds=0.005, rounds=1)
    assert (p.flops, p.bytes) == (2 * 32 ** 3, 3 * 32 * 32 * 4)
    assert p.intensity == pytest.approx(roofline.matmul_intensity(32, 32, 32))
    assert p.seconds > 0 and p.flops_per_s == pytest.approx(p.flops / p.seconds)
    r = roofline.Roofline("test machine", "cpu", {"fp32": 100e9}, 10e9, 64, 1024)
    assert p.share_of_roof(r) == pytest.approx(p.flops_per_s / r.attainable(p.intensity))
    assert "FLOP/byte" in p.line(r) and "memory-bound" in p.line(r)  # ridge 10, intensity 5.3
    assert p.line(r).startswith("matmul: 65.5 kFLOP, 12.3 kB per call -> 5.33 FLOP/byte")
    low = roofline.Point("tiny", 1, 1000, 1e-3)
    roofline.plot(r, [p, low, ("tuple", 2.0, 1e9)])
    with pytest.raises(ValueError, match="counted 0 FLOPs"):
        roofline.place("relu", lambda: torch.relu(a), "cpu")
    with pytest.raises(ValueError, match="label"):
        roofline.place("", lambda: a @ b, "cpu")


def test_measure_reuses_a_roofline_for_the_same_arguments_unless_asked_not_to():
    kwargs = dict(dtypes=("fp32",), matmul_n=32, copy_bytes=2**14, min_seconds=0.002, rounds=1)
    first = roofline.measure("cpu", **kwargs)
    assert roofline.measure("cpu", **kwargs) is first
    assert roofline.measure("cpu", reuse=False, **kwargs) is not first
    assert roofline.measure("cpu", **{**kwargs, "matmul_n": 48}) is not first


@pytest.mark.parametrize("groups", [1, 4, 16])
def test_a_grouped_convolutions_backward_counts_twice_its_forward(groups):
    import torch

    conv = torch.nn.Conv2d(16, 16, 3, padding=1, groups=groups, bias=False)
    x = torch.randn(2, 16, 8, 8, requires_grad=True)
    forward = 2 * 2 * 16 * (16 // groups) * 9 * 64  # every output value: 16/groups x 3 x 3 multiply-adds
    with torch.no_grad():
        assert roofline.count(lambda: conv(x)).flops == forward
    # forward, then the input's gradient and the weight's gradient, each as many multiply-adds as the forward
    assert roofline.count(lambda: conv(x).sum().backward()).flops == 3 * forward
    assert roofline.count(lambda: conv(x.detach()).sum().backward()).flops == 2 * forward
