"""Tests for greenlab.models: the families, argument checks, FLOP and parameter counts."""

import pytest
import torch
import torch.nn as nn

from greenlab.training import models


@pytest.mark.parametrize("name,kw,shape", [
    ("cnn", {}, (1, 28, 28)),
    ("cnn", {"depth": 3, "width": 8, "separable": True, "norm": "group", "in_channels": 3}, (3, 32, 32)),
    ("cnn", {"norm": "none", "kernel_size": 5}, (1, 28, 28)),
    ("resnet", {}, (3, 32, 32)),
    ("resnet", {"depth": 14, "width": 8, "norm": "group"}, (3, 32, 32)),
    ("mlp", {"input_shape": (3, 8, 8), "hidden": (16,), "num_classes": 4}, (3, 8, 8)),
])
def test_families_build_and_run(name, kw, shape):
    model = models.build(name, **kw)
    out = model(torch.randn(2, *shape))
    assert out.shape == (2, kw.get("num_classes", 10))


@pytest.mark.parametrize("name,kw,match", [
    ("vgg", {}, "allowed: cnn, resnet, mlp"),
    ("cnn", {"widht": 8}, "allowed: num_classes"),
    ("cnn", {"norm": "layer"}, "batch, group, none"),
    ("cnn", {"kernel_size": 4}, "odd"),
    ("cnn", {"depth": 0}, "depth"),
    ("resnet", {"depth": 9}, "6n\\+2"),
    ("mlp", {"dropout": 1.5}, "dropout"),
    ("cnn", {"num_classes": 1}, "num_classes"),
])
def test_bad_arguments_say_what_is_allowed(name, kw, match):
    with pytest.raises(ValueError, match=match):
        models.build(name, **kw)


def test_width_doubles_per_block_and_separable_is_smaller():
    cnn = models.build("cnn", depth=3, width=8)
    convs = [m for m in cnn.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [8, 16, 32]
    sep = models.build("cnn", depth=3, width=8, separable=True)
    assert models.count_params(sep) < models.count_params(cnn)
    deeper = models.build("resnet", depth=20)
    assert models.count_params(deeper) > models.count_params(models.build("resnet", depth=8))


def test_flops_of_a_linear_layer():
    layer = nn.Linear(10, 5)
    f = models.flops(layer, (10,), batch_size=4)
    assert f.forward == 2 * 4 * 10 * 5
    # backward of the first layer: weight gradient only (the input needs no gradient)
    assert f.train_step == 2 * f.forward
    assert f.forward_per_sample == 2 * 10 * 5


def test_flops_of_a_conv_layer():
    conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
    f = models.flops(conv, (3, 16, 16), batch_size=2)
    assert f.forward == 2 * 2 * (8 * 16 * 16) * (3 * 3 * 3)
    assert f.train_step == 2 * f.forward


def test_flops_leave_the_model_untouched():
    model = models.build("cnn", width=4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    f = models.flops(model, (1, 28, 28))
    assert f.train_step > f.forward > 0
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert all(p.grad is None for p in model.parameters())
    assert model.training


def test_count_params():
    layer = nn.Linear(10, 5)
    assert models.count_params(layer) == 55
    layer.bias.requires_grad_(False)
    assert models.count_params(layer) == 50
    assert models.count_params(layer, trainable_only=False) == 55


def test_flops_leave_weights_grads_and_statistics_untouched_and_handle_pruning_masks():
    import torch.nn.utils.prune as prune

    model = models.build("cnn", num_classes=10, in_channels=1, depth=2, width=8)
    model.train()
    last_linear = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    prune.l1_unstructured(last_linear, name="weight", amount=0.5)  # weight is now computed by a hook
    masked_state = {k: v.clone() for k, v in model.state_dict().items()}
    count = models.flops(model, (1, 28, 28), batch_size=4)
    assert count.forward > 0 and count.train_step > count.forward
    assert model.training
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        assert torch.equal(v, masked_state[k]), k


def test_flops_at_batch_one_for_batchnorm_nets_that_shrink_to_one_pixel():
    model = models.build("cnn", num_classes=10, in_channels=3, depth=4, width=8, norm="batch")
    one = models.flops(model, (3, 8, 8), batch_size=1)
    four = models.flops(model, (3, 8, 8), batch_size=4)
    assert one.forward * 4 == four.forward


@pytest.mark.parametrize("groups", [1, 16])
def test_a_training_step_counts_a_grouped_convolution_per_group(groups):
    # The first layer's backward pass computes only the weight's gradient (its input is data), as
    # much arithmetic as the forward pass: 2x forward in all, grouped or not. torch's own formula
    # counts a depthwise backward as dense (16x too many here); the course's counter does not.
    model = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=groups, bias=False), nn.Flatten())
    count = models.flops(model, (16, 8, 8), batch_size=2)
    assert count.forward == 2 * 2 * 16 * (16 // groups) * 9 * 64
    assert count.train_step == 2 * count.forward
