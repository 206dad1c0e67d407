"""greenlab.compress: pruning, quantisation, distillation, fine-tuning, break-even."""

import copy
import math
import warnings

import pytest
import torch
import torch.nn as nn

from greenlab.techniques import compress
from greenlab.training import models
from greenlab.training.data import generate
from greenlab.training.loop import TrainConfig


def _tiny_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def _tiny_cnn(**kw):
    torch.manual_seed(0)
    return models.build("cnn", width=8, **kw)


# --- unstructured pruning ---

@pytest.mark.parametrize("amount", [0.0, 0.3, 0.7])
def test_prune_unstructured_reaches_the_amount_and_leaves_the_original(amount):
    model = _tiny_cnn()
    pruned = compress.prune_unstructured(model, amount)
    total = sum(m.weight.numel() for m in pruned.modules() if isinstance(m, compress.PRUNABLE))
    assert abs(compress.sparsity(pruned) - amount) <= 1 / total
    assert compress.sparsity(model) == 0.0
    assert not any(name.endswith("weight_orig") for name, _ in pruned.named_parameters())


def test_prune_unstructured_is_global_by_magnitude():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 10))
    with torch.no_grad():
        model[0].weight.mul_(0.001)  # far smaller than every weight of layer 1
    pruned = compress.prune_unstructured(model, 0.5)
    assert int((pruned[0].weight == 0).sum()) == 100
    assert int((pruned[1].weight == 0).sum()) == 0


def test_prune_unstructured_not_permanent_keeps_masks():
    pruned = compress.prune_unstructured(_tiny_mlp(), 0.5, permanent=False)
    assert hasattr(pruned[1], "weight_mask") and hasattr(pruned[1], "weight_orig")
    assert abs(compress.sparsity(pruned) - 0.5) < 0.01


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, True, "0.5", None])
def test_amount_outside_unit_interval_is_rejected(bad):
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        compress.prune_unstructured(_tiny_mlp(), bad)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        compress.prune_channels(_tiny_cnn(), bad)


# --- structured pruning ---

def test_prune_channels_builds_a_smaller_cnn_that_runs():
    model = _tiny_cnn(depth=2).eval()
    pruned = compress.prune_channels(model, 0.5).eval()
    convs = [m for m in pruned.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [4, 8]
    assert convs[1].in_channels == 4
    bns = [m for m in pruned.modules() if isinstance(m, nn.BatchNorm2d)]
    assert [b.num_features for b in bns] == [4, 8]
    assert pruned.head.in_features == 8
    assert pruned(torch.randn(3, 1, 28, 28)).shape == (3, 10)
    assert models.count_params(pruned) < models.count_params(model) / 2
    assert [m.out_channels for m in model.modules() if isinstance(m, nn.Conv2d)] == [8, 16]


@pytest.mark.parametrize("kw", [{"separable": True}, {"norm": "group"}, {"norm": "none", "depth": 3}])
def test_prune_channels_variants_of_the_cnn_family(kw):
    model = _tiny_cnn(**kw).eval()
    pruned = compress.prune_channels(model, 0.5).eval()
    assert pruned(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    assert models.count_params(pruned) < models.count_params(model)
    for gn in (m for m in pruned.modules() if isinstance(m, nn.GroupNorm)):
        assert gn.num_channels % gn.num_groups == 0


def test_prune_channels_keeps_the_largest_filters_and_matches_masked_outputs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 6, 3, padding=1, bias=False), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 2 * 2, 3))
    scale = torch.tensor([1.0, 5.0, 0.1, 4.0, 0.2, 3.0])  # keep 1, 3, 5 (largest norms)
    with torch.no_grad():
        model[0].weight.copy_(torch.randn(6, 2, 3, 3).sign() * scale[:, None, None, None])
    pruned = compress.prune_channels(model, 0.5)
    assert pruned[0].out_channels == 3 and pruned[3].out_channels == 2
    assert torch.equal(pruned[0].weight, model[0].weight[[1, 3, 5]])
    # which filters of the second conv survived (matched by their bias)
    kept2 = [i for i, b in enumerate(model[3].bias) if bool(torch.isin(b, pruned[3].bias))]
    assert len(kept2) == 2
    # the pruned net computes exactly what the original computes with dropped channels zeroed
    masked = copy.deepcopy(model)
    dropped2 = [i for i in range(4) if i not in kept2]
    with torch.no_grad():
        masked[0].weight[[0, 2, 4]] = 0
        masked[3].weight[dropped2] = 0
        masked[3].bias[dropped2] = 0
    x = torch.randn(5, 2, 4, 4)
    assert torch.allclose(pruned(x), masked(x), atol=1e-5)


def test_prune_channels_leaves_grouped_convolutions_whole():
    model = nn.Sequential(nn.Conv2d(2, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=2), nn.ReLU(),
                          nn.Conv2d(8, 4, 1), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
    pruned = compress.prune_channels(model, 0.5)
    assert [pruned[i].out_channels for i in (0, 2, 4)] == [8, 8, 2]
    assert pruned(torch.randn(1, 2, 8, 8)).shape == (1, 2)


def test_prune_channels_rejects_residual_models():
    with pytest.raises(ValueError, match="residual"):
        compress.prune_channels(models.build("resnet", width=4), 0.5)


def test_prune_channels_zero_amount_is_an_exact_copy():
    model = _tiny_cnn().eval()
    x = torch.randn(2, 1, 28, 28)
    assert torch.equal(compress.prune_channels(model, 0.0).eval()(x), model(x))


# --- quantisation ---

def test_quantize_dynamic_shrinks_the_model_and_stays_close():
    model = _tiny_mlp().eval()
    quantized = compress.quantize_dynamic(model)
    assert compress.model_size_bytes(quantized) < 0.4 * compress.model_size_bytes(model)
    assert isinstance(quantized[1], torch.ao.nn.quantized.dynamic.Linear)
    x = torch.randn(16, 64)
    ref = model(x)
    assert (quantized(x) - ref).abs().max() < 0.05 * ref.abs().max() + 0.02
    assert isinstance(model[1], nn.Linear)  # original untouched


def test_quantize_dynamic_needs_linear_layers():
    with pytest.raises(ValueError, match="quantize_static"):
        compress.quantize_dynamic(nn.Sequential(nn.Conv2d(1, 2, 3)))


def test_quantize_static_cnn():
    torch.manual_seed(0)
    model = models.build("cnn", width=32).eval()  # big enough that weights outweigh file overhead
    x = torch.randn(8, 1, 28, 28)
    quantized = compress.quantize_static(model, [(x, None)])
    assert compress.model_size_bytes(quantized) < 0.6 * compress.model_size_bytes(model)
    ref = model(x)
    assert (quantized(x) - ref).abs().max() < 0.1 * ref.abs().max() + 0.05


def test_quantize_static_errors():
    model = _tiny_cnn().eval()
    with pytest.raises(ValueError, match="empty"):
        compress.quantize_static(model, [])
    with pytest.raises(ValueError, match="backend"):
        compress.quantize_static(model, [torch.randn(2, 1, 28, 28)], backend="tpu")

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x) if x.sum() > 0 else -self.fc(x)

    with pytest.raises(ValueError, match="trace"):
        compress.quantize_static(Branchy(), [torch.randn(2, 4)])


def test_model_size_bytes_counts_the_weights():
    size = compress.model_size_bytes(nn.Linear(100, 100))
    assert 4 * (100 * 100 + 100) < size < 4 * (100 * 100 + 100) + 4096


# --- break-even ---

@pytest.mark.parametrize("args, expected", [
    ((100.0, 0.5, 0.3), 500),
    ((100.0, 0.5, 0.25), 400),
    ((1.0, 0.3, 0.1), 5),
    ((1.0, 0.3, 0.0999), 5),
    ((1.0, 0.3, 0.1001), 6),
    ((0.0, 0.5, 0.5), 0),
    ((10, 2, 0), 5),
])
def test_break_even_golden_values(args, expected):
    assert compress.break_even_inferences(*args) == expected


def test_break_even_never_when_no_saving():
    assert compress.break_even_inferences(10.0, 0.3, 0.3) == math.inf
    assert compress.break_even_inferences(10.0, 0.3, 0.4) == math.inf


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "1", None])
def test_break_even_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="joules"):
        compress.break_even_inferences(bad, 0.5, 0.3)


# --- distillation, fine-tuning, inference cost ---

def test_distillation_loss_reduces_to_its_parts():
    torch.manual_seed(0)
    s, t = torch.randn(8, 5), torch.randn(8, 5)
    y = torch.randint(0, 5, (8,))
    assert compress.distillation_loss(s, s, y, alpha=1.0).abs() < 1e-6
    assert torch.isclose(compress.distillation_loss(s, t, y, alpha=0.0), nn.functional.cross_entropy(s, y))
    assert compress.distillation_loss(s, t, y, temperature=2.0, alpha=1.0) > 0


def test_distill_trains_a_copy_of_the_student_and_measures_it():
    data = generate("synthetic", n_train=128, n_test=64, seed=0)
    teacher = _tiny_cnn()
    student = models.build("cnn", width=4, depth=1)
    before = [p.clone() for p in student.parameters()]
    result = compress.distill(teacher, student, data, TrainConfig(batch_size=32, max_steps=3),
                              device="cpu")
    assert result.steps == 3 and result.samples == 96 and len(result.history) == 3
    assert result.seconds > 0 and result.joules >= 0 and result.energy.sources
    assert 0.0 <= result.accuracy <= 1.0 and 0.0 <= result.teacher_accuracy <= 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, student.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(before, result.student.parameters()))
    with pytest.raises(ValueError, match="alpha"):
        compress.distill(teacher, student, data, alpha=1.5)


@pytest.mark.parametrize("name", ["cnn", "resnet", "mlp"])
def test_fine_tune_replaces_the_head_and_freezes_the_rest(name):
    model = models.build(name, width=4) if name != "mlp" else models.build("mlp", hidden=(16,))
    adapted = compress.fine_tune(model, 3)
    trainable = [n for n, p in adapted.named_parameters() if p.requires_grad]
    assert trainable and all(n.rsplit(".", 1)[0] == trainable[0].rsplit(".", 1)[0] for n in trainable)
    shape = (2, 3, 32, 32) if name == "resnet" else (2, 1, 28, 28)
    assert adapted(torch.randn(shape)).shape == (2, 3)
    assert model(torch.randn(shape)).shape == (2, 10)
    assert compress.fine_tune(model, 3, freeze_features=False) is not None
    with pytest.raises(ValueError, match="new_num_classes"):
        compress.fine_tune(model, 1)


def test_energy_per_inference_reports_per_sample_figures_with_provenance():
    model = _tiny_mlp()
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cost = compress.energy_per_inference(model, torch.randn(8, 64), repeats=3, warmup=1, max_repeats=3)
    assert cost.batch_size == 8 and cost.repeats == 3
    assert cost.seconds_per_sample > 0 and cost.joules_per_sample >= 0
    assert cost.median_seconds_per_batch > 0 and cost.sources
    assert cost.to_dict()["energy"]["label"] == "inference"
    assert model.training  # mode restored
    with pytest.raises(ValueError, match="repeats"):
        compress.energy_per_inference(model, torch.randn(8, 64), repeats=0)


def test_compare_inference_speed_structure():
    dense = _tiny_cnn()
    variants = {"dense": dense, "channels": compress.prune_channels(dense, 0.5)}
    result = compress.compare_inference_speed(variants, torch.randn(4, 1, 28, 28), rounds=3, warmup=1)
    assert result.ratios["dense"] == 1.0 and result.baseline == "dense" and result.rounds == 3
    assert all(s > 0 for s in result.median_seconds.values())
    assert "channels" in result.table() and dense.training
    with pytest.raises(ValueError, match="baseline"):
        compress.compare_inference_speed(variants, torch.randn(4, 1, 28, 28), baseline="sparse")


# --- the exercises' reference answers --------------------------------------------------------

def test_fine_grained_prune_zeroes_exactly_the_smallest_magnitudes_and_keeps_the_input():
    w = torch.tensor([[0.5, -0.5, 0.5, 2.0], [-0.5, 1.0, 0.5, -3.0]])
    before = w.clone()
    pruned, mask = compress.fine_grained_prune(w, 0.5)
    assert torch.equal(w, before)
    assert int((~mask).sum()) == 4 and torch.equal(pruned, w * mask)
    assert float(w[~mask].abs().max()) <= float(w[mask].abs().min())


def test_channel_prune_keeps_the_largest_l1_filters_and_the_outputs_on_them():
    torch.manual_seed(0)
    conv, nxt = nn.Conv2d(3, 6, 3, padding=1), nn.Conv2d(6, 4, 3, padding=1)
    new_conv, new_next, kept = compress.channel_prune(conv, nxt, 3)
    l1 = conv.weight.abs().sum(dim=(1, 2, 3))
    assert kept.tolist() == torch.topk(l1, 3).indices.sort().values.tolist()
    x = torch.randn(2, 3, 5, 5)
    with torch.no_grad():
        full = conv(x)
        assert torch.allclose(new_conv(x), full[:, kept])
        masked = full.clone()
        masked[:, [i for i in range(6) if i not in kept.tolist()]] = 0
        assert torch.allclose(new_next(new_conv(x)), nxt(masked), atol=1e-6)
    with pytest.raises(ValueError, match="keep"):
        compress.channel_prune(conv, nxt, 0)


@pytest.mark.parametrize("per_channel", [False, True])
def test_linear_quantize_matches_torch_and_round_trips_within_half_a_step(per_channel):
    torch.manual_seed(0)
    w = torch.randn(4, 6)
    q, scale, zero = compress.linear_quantize(w, 8, per_channel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if per_channel:
            ref = torch.quantize_per_channel(w, scale.double(), zero.long(), 0, torch.qint8)
        else:
            ref = torch.quantize_per_tensor(w, float(scale), int(zero), torch.qint8)
    assert torch.equal(q, ref.int_repr().int())
    step = scale.view(-1, 1) if per_channel else scale
    assert bool(((compress.dequantize(q, scale, zero) - w).abs() <= step / 2 + 1e-6).all())
    q4, _, _ = compress.linear_quantize(w, 4, per_channel)
    assert int(q4.min()) >= -8 and int(q4.max()) <= 7


def test_fake_quantize_rounds_forward_and_passes_the_gradient_straight_through():
    w = torch.randn(5, 3, requires_grad=True)
    out = compress.fake_quantize(w, 4)
    q, scale, zero = compress.linear_quantize(w.detach(), 4)
    assert torch.allclose(out.detach(), compress.dequantize(q, scale, zero), atol=1e-6)
    out.sum().backward()
    assert torch.equal(w.grad, torch.ones_like(w))


def test_fake_quantized_model_keeps_its_shape_and_trains_float_weights():
    model = _tiny_mlp()
    fq = compress.fake_quantized(model, bits=4)
    x = torch.randn(3, 64)
    fq(x).sum().backward()
    assert fq[1].parametrizations.weight.original.grad is not None
    assert torch.unique(fq[1].weight.detach()).numel() <= 16  # 4 bits: at most 16 values


def test_prune_with_masks_uses_the_given_function_globally():
    model = _tiny_cnn()
    calls = []

    def by_hand(weights, sparsity):
        calls.append(weights.numel())
        k = round(sparsity * weights.numel())
        mask = torch.ones_like(weights, dtype=torch.bool)
        mask[torch.argsort(weights.abs())[:k]] = False
        return weights * mask, mask

    pruned, masks = compress.prune_with_masks(model, 0.4, prune_fn=by_hand)
    assert len(calls) == 1 and abs(compress.sparsity(pruned) - 0.4) < 1e-3
    assert compress.sparsity(model) < 0.01
    keep = compress.keep_masks(masks)
    with torch.no_grad():
        for p in pruned.parameters():
            p.add_(1.0)

    class State:
        pass

    state = State()
    state.model = pruned
    keep(state)
    assert abs(compress.sparsity(pruned) - 0.4) < 1e-3


def test_prune_channels_with_a_channel_function_matches_the_default_in_shape():
    model = _tiny_cnn(depth=2).eval()
    default = compress.prune_channels(model, 0.5)
    mine = compress.prune_channels(model, 0.5, channel_fn=compress.channel_prune)
    assert models.count_params(mine) == models.count_params(default)
    assert mine(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_distill_trains_with_the_given_loss():
    calls = []

    def loss(student, teacher, targets, temperature, alpha):
        calls.append(temperature)
        return compress.distillation_loss(student, teacher, targets, temperature, alpha)

    ds = _small_dataset()
    result = compress.distill(_tiny_mlp(), _tiny_mlp(), ds, TrainConfig(max_steps=2, batch_size=16), loss_fn=loss)
    assert result.steps == 2 and calls == [4.0, 4.0]


def _small_dataset():
    from types import SimpleNamespace

    torch.manual_seed(0)
    x = torch.randn(48, 64)
    y = torch.randint(0, 10, (48,))
    return SimpleNamespace(train_x=x, train_y=y, test_x=x[:16], test_y=y[:16])


# --- paired, interleaved inference measurements and break-evens --------------------------------

def test_energy_per_inference_repeats_until_the_window_is_long_enough_or_flags_it():
    tiny = nn.Linear(2, 2)
    x = torch.randn(1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the short-window warning is handled, not passed on
        cost = compress.energy_per_inference(tiny, x, repeats=1, warmup=0, max_repeats=4)
    assert cost.repeats == 4 and cost.short_window and "short" in cost.flag


def test_compare_inference_pairs_rounds_and_gives_verdicts():
    variants = {"a": _tiny_mlp(), "b": _tiny_mlp()}
    result = compress.compare_inference(variants, torch.randn(8, 64), rounds=3, repeats=2, max_repeats=8)
    assert all(len(result.joules[n]) == 3 for n in variants)
    assert result.verdict("b").n == 3
    assert "energy vs a" in result.table()
    with pytest.raises(ValueError):
        result.verdict("c")
    assert all(len(result.windows[n]) == 3 for n in variants)
    assert result.sources and result.estimated == any(m.estimated for ms in result.windows.values() for m in ms)


def _window(source, estimated, problems=()):
    from greenlab.energy.measure import ComponentEnergy, Measurement

    cpu = ComponentEnergy("cpu", source, 2.0, 1.0, 2.0, estimated, 0.1)
    return Measurement("inference", 1.0, {"cpu": cpu}, problems=list(problems))


def test_compare_inference_reads_its_flags_from_every_windows_measurement():
    whole = [_window("rapl", False), _window("rapl", False)]
    lost = [_window("rapl", False), _window("estimate", True, ["gpu:0: nvml read failed"])]
    result = compress.InferenceComparison(
        names=["a", "b"], joules={"a": [1.0, 1.0], "b": [0.5, 0.5]}, seconds={"a": [1.0, 1.0], "b": [1.0, 1.0]},
        short={"a": [False, False], "b": [False, False]}, baseline="a", rounds=2, batch_size=4,
        windows={"a": whole, "b": lost})
    assert not result.complete and result.estimated
    assert result.problems == ["b round 2: gpu:0: nvml read failed"]
    assert result.flags()["problems"] == result.problems and result.sources == {"cpu": "estimate"}
    assert "INCOMPLETE" in result.table() and "b round 2" in result.table()
    fine = compress.InferenceComparison(
        names=["a"], joules={"a": [1.0]}, seconds={"a": [1.0]}, short={"a": [False]}, baseline="a",
        rounds=1, batch_size=4, windows={"a": [whole[0]]})
    assert fine.complete and not fine.estimated and fine.problems == []
    assert "INCOMPLETE" not in fine.table()


def test_break_even_interval_is_stated_only_when_the_saving_is_detectable():
    clear = compress.break_even_interval(100.0, [1.0, 1.1, 0.9, 1.0], [0.5, 0.6, 0.4, 0.5])
    assert clear.detectable and clear.uses == 200
    assert clear.uses_low <= clear.uses <= clear.uses_high
    assert "repaid after about 200" in clear.sentence()
    unclear = compress.break_even_interval(100.0, [1.0, 0.5, 1.2], [0.6, 0.9, 0.8])
    assert not unclear.detectable and unclear.uses is None
    assert "no break-even" in unclear.sentence()
    worse = compress.break_even_interval(100.0, [1.0, 1.0, 1.0], [1.5, 1.6, 1.4])
    assert worse.costs_more and "never" in worse.sentence()
    few = compress.break_even_interval(100.0, [1.0, 1.0], [0.5, 0.5])
    assert few.uses is None and "too few" in few.sentence()


def test_compare_inference_is_never_silent_for_long(monkeypatch):
    import contextlib

    from greenlab.base import progress

    entered = []

    @contextlib.contextmanager
    def heartbeat(label, *args, **kwargs):  # the heartbeat's own timing is tested in test_progress.py
        entered.append(label)
        yield

    monkeypatch.setattr(progress, "heartbeat", heartbeat)
    variants = {"a": _tiny_mlp(), "b": _tiny_mlp()}
    result = compress.compare_inference(variants, torch.randn(8, 64), rounds=3, repeats=2, max_repeats=8)
    assert entered == ["greenlab.compress: 3 round(s) of 2 models' energy windows"]
    assert all(len(result.joules[n]) == 3 for n in variants)  # every window ran inside it
