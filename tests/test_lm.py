"""greenlab.techniques.lm (corpus, model, token training loop, FLOP counts), greenlab.techniques.lm.sharding (ZeRO and
parallelism arithmetic) and lesson 10's checker. Tiny sizes: the whole file runs in seconds."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from greenlab.course import checks
from greenlab.techniques import lm
from greenlab.techniques.lm import sharding
from greenlab.experiments import Comparison


@pytest.fixture(scope="module")
def corpus():
    return lm.load_corpus(max_bytes=20_000)


def _counter():
    """A fake meter whose counter rises at a known rate (100 W)."""
    from fakes import SlopeSource

    return SlopeSource(watts=100.0)


def tiny(**kw):
    torch.manual_seed(0)
    return lm.TinyGPT(d_model=16, n_layers=2, n_heads=2, max_seq_len=32, **kw)


# --- corpus ------------------------------------------------------------------------------------

def test_corpus_is_python_text_split_deterministically(corpus):
    again = lm.load_corpus(max_bytes=20_000)
    assert torch.equal(again.train, corpus.train) and torch.equal(again.val, corpus.val)
    assert corpus.n_bytes == 20_000 and corpus.val.numel() == 2_000
    assert "pydoc_data.topics" in corpus.source and "PSF" in corpus.licence
    text = bytes(corpus.train[:5000].tolist()).decode("utf-8", errors="ignore")
    assert " the " in text  # English prose, not noise
    assert 0 < corpus.unigram_entropy() < math.log(256)


def test_corpus_refuses_bad_arguments():
    with pytest.raises(ValueError, match="name"):
        lm.load_corpus("wikipedia")
    with pytest.raises(ValueError, match="val_fraction"):
        lm.load_corpus(val_fraction=0.9)
    with pytest.raises(ValueError, match="max_bytes"):
        lm.load_corpus(max_bytes=10)


def test_batch_targets_are_inputs_shifted_by_one(corpus):
    x, y = lm.batch(corpus.train, 16, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 16) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    with pytest.raises(ValueError, match="seq_len"):
        lm.batch(corpus.train, 0, 4)


# --- model -------------------------------------------------------------------------------------

def test_model_is_causal_a_later_byte_never_changes_an_earlier_logit():
    model = tiny().eval()
    x = torch.randint(0, 256, (1, 12))
    x2 = x.clone()
    x2[0, 8:] = (x2[0, 8:] + 1) % 256
    with torch.no_grad():
        a, b = model(x), model(x2)
    assert torch.allclose(a[0, :8], b[0, :8], atol=1e-6)
    assert not torch.allclose(a[0, 8:], b[0, 8:])


def test_checkpointing_gives_the_same_gradients_and_keeps_less(corpus):
    x, y = lm.batch(corpus.train, 32, 4, torch.Generator().manual_seed(1))
    grads, peaks = [], []
    from greenlab.techniques.batching.max_batch import measure_step_peak_bytes

    for ckpt in (False, True):
        model = tiny(checkpoint=ckpt)
        _, peak = measure_step_peak_bytes(lambda m=model: lm.lm_loss(m, x, y).backward())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        peaks.append(peak)
    assert torch.allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)
    assert peaks[1] < peaks[0]


def test_model_refuses_bad_sizes():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        lm.TinyGPT(d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="max_seq_len"):
        tiny()(torch.zeros(1, 33, dtype=torch.long))


# --- FLOPs -------------------------------------------------------------------------------------

def test_counted_flops_are_six_per_matrix_weight_per_token_plus_attention():
    model = tiny()
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    f = lm.train_step_flops(model, 16, 3)
    assert f["other"] == 6 * weights * 16 * 3
    assert f["attention"] == lm.attention_flops(16, 16, 2, 3) > 0
    assert f["total"] == f["other"] + f["attention"]


def test_attention_flops_grow_with_the_square_of_the_sequence():
    assert lm.attention_flops(64, 8, 2) == 4 * lm.attention_flops(32, 8, 2)
    assert lm.attention_flops(32, 8, 2, backward=False) * 7 == lm.attention_flops(32, 8, 2) * 2
    with pytest.raises(ValueError, match="seq_len"):
        lm.attention_flops(0, 8, 2)


def test_checkpointed_step_counts_one_more_forward_pass_of_the_blocks():
    plain, ckpt = lm.train_step_flops(tiny(), 16, 2), lm.train_step_flops(tiny(checkpoint=True), 16, 2)
    assert 1 < ckpt["total"] / plain["total"] <= 4 / 3


def test_compile_break_even():
    assert lm.compile_break_even_steps(40, 0.05, 0.03) == pytest.approx(2000)
    assert lm.compile_break_even_steps(40, 0.03, 0.05) == math.inf
    with pytest.raises(ValueError, match="eager_step_seconds"):
        lm.compile_break_even_steps(1, 0, 1)


# --- training ----------------------------------------------------------------------------------

def test_train_lm_learns_and_reads_energy_to_target_off_its_history(corpus):
    cfg = lm.LMConfig(seq_len=32, batch_size=8, steps=40, eval_every=10, lr=1e-2, target_loss=4.0)
    run = lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()])
    losses = [r["val_loss"] for r in run.history]
    assert [r["step"] for r in run.history] == [10, 20, 30, 40]
    assert losses[-1] < losses[0] and losses[-1] < math.log(256)
    assert run.tokens == 40 * 32 * 8
    assert run.joules_per_token == pytest.approx(run.joules / run.tokens)
    joules = [r["joules"] for r in run.history]
    assert joules == sorted(joules) and joules[0] > 0
    assert run.joules == pytest.approx(100.0 * run.seconds, rel=0.01)  # the known slope
    first = next(r for r in run.history if r["val_loss"] <= 4.0)
    assert run.joules_to_target == first["joules"] and run.seconds_to_target == first["seconds"]


def test_target_never_reached_is_none_not_zero(corpus):
    cfg = lm.LMConfig(seq_len=16, batch_size=2, steps=2, eval_every=1, target_loss=0.01)
    run = lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()])
    assert run.joules_to_target is None and run.seconds_to_target is None


def test_same_seed_same_run_and_bf16_stays_close(corpus):
    cfg = lm.LMConfig(seq_len=16, batch_size=4, steps=3, eval_every=3)
    a = lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()])
    b = lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()])
    assert a.val_loss == b.val_loss
    c = lm.train_lm(tiny(), corpus, dataclasses.replace(cfg, precision="bf16"), device="cpu", sources=[_counter()])
    assert c.val_loss == pytest.approx(a.val_loss, rel=0.05)


def test_config_refuses_bad_values():
    with pytest.raises(ValueError, match="precision"):
        lm.LMConfig(precision="fp16")
    with pytest.raises(ValueError, match="steps"):
        lm.LMConfig(steps=0)
    with pytest.raises(ValueError, match="target_loss"):
        lm.LMConfig(target_loss=-1)
    with pytest.raises(ValueError, match="seq_len 64 exceeds"):
        lm.train_lm(tiny(), lm.load_corpus(max_bytes=4096), lm.LMConfig(seq_len=64), device="cpu")
    with pytest.raises(ValueError, match="tokens"):
        lm.joules_per_token(1.0, 0)


def test_compare_lm_pairs_repeats_into_a_comparison(corpus):
    cfg = lm.LMConfig(seq_len=16, batch_size=2, steps=2, eval_every=2)
    seen = []

    def model_fn(c):
        seen.append((c.label, c.seed))
        return tiny(checkpoint=c.label == "b")

    cmp = lm.compare_lm({"a": cfg, "b": cfg}, model_fn, corpus, repeats=2, device="cpu")
    assert isinstance(cmp, Comparison) and cmp.repeats == 2
    assert seen == [("a", 0), ("b", 0), ("b", 1), ("a", 1)]  # rotated order, paired seeds
    assert "b" in cmp.verdict("b", metric="seconds")
    with pytest.raises(ValueError, match="LMConfig"):
        lm.compare_lm({"a": object()}, model_fn, corpus)


# --- sharding arithmetic -----------------------------------------------------------------------

def test_zero_stages_shard_optimizer_then_gradients_then_parameters():
    n = 1000
    totals = [sharding.zero_bytes_per_rank(n, 4, s)["total"] for s in range(4)]
    assert totals == [16 * n, 4 * n + 4 * n + 2 * n, 4 * n + n + 2 * n, 4 * n]
    z = sharding.zero_bytes_per_rank(1001, 4, 3)
    assert z["params"] == 251 * 4  # shards padded to whole elements
    mixed = sharding.zero_bytes_per_rank(n, 8, 0, param_bytes=2, grad_bytes=2, optimizer_bytes=12)
    assert mixed["total"] == 16 * n  # the paper's 2 + 2 + 12 bytes per parameter
    with pytest.raises(ValueError, match="stage"):
        sharding.zero_bytes_per_rank(n, 4, 4)
    with pytest.raises(ValueError, match="world_size"):
        sharding.zero_bytes_per_rank(n, 0, 1)


def test_communication_arithmetic():
    assert sharding.ring_allreduce_bytes(1000, 1) == 0
    assert sharding.ring_allreduce_bytes(1000, 4) == pytest.approx(1500)
    ddp = sharding.data_parallel_bytes_per_step(1000, 4)
    assert sharding.data_parallel_bytes_per_step(1000, 4, stage=3) == pytest.approx(1.5 * ddp)
    assert sharding.tensor_parallel_bytes_per_step(2, 8, 4, 3, 2) == pytest.approx(4 * 3 * 2 * 8 * 4 * 4)
    assert sharding.pipeline_bytes_per_step(2, 8, 4, stages=1) == 0
    assert sharding.pipeline_bytes_per_step(2, 8, 4, stages=3) == 2 * 2 * 2 * 8 * 4 * 4


# --- the lesson's checker ----------------------------------------------------------------------

def test_zero_checker_passes_the_solution_and_names_the_usual_mistakes():
    def right(n, world, stage):  # written here, not the library's: a graded answer must be the learner's own
        shard = -(-n // world)
        return ((shard if stage >= 3 else n) * 4 + (shard if stage >= 2 else n) * 4
                + (shard if stage >= 1 else n) * 8)

    assert all(right(n, w, s) == sharding.zero_bytes_per_rank(n, w, s)["total"]
               for n in (10, 1001) for w in (1, 3) for s in range(4))
    assert not checks.zero_bytes_per_rank(lambda n, w, s: sharding.zero_bytes_per_rank(n, w, s)["total"]).passed

    def params_first(n, world, stage):  # shards parameters at stage 1
        return 4 * n / world + 4 * n + 8 * n if stage >= 1 else 16 * n

    assert checks.zero_bytes_per_rank(right).passed
    assert not checks.zero_bytes_per_rank(lambda n, w, s: 16 * n).passed
    wrong = checks.zero_bytes_per_rank(params_first)
    assert not wrong.passed and "optimizer state (stage 1)" in wrong.text()
    assert not checks.zero_bytes_per_rank(None).attempted


# --- lesson 12: LoRA, serving -------------------------------------------------------------------

def test_lora_starts_at_the_model_trains_only_adapters_and_counts_them(corpus):
    from greenlab.techniques.lm import lora

    base = tiny()
    model = lora.add_lora(tiny(), rank=2)
    x, _ = lm.batch(corpus.train, 16, 2, torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(model(x), base(x))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    per_block = 2 * ((16 + 48) + (16 + 16) + (16 + 64) + (64 + 16))
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 2 * per_block
    frozen = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
    lm.train_lm(model, corpus, lm.LMConfig(seq_len=16, batch_size=2, steps=2, eval_every=2),
                device="cpu", sources=[_counter()])
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if not p.requires_grad)
    assert lora.adam_state_bytes(1000, 1) == 2000 and lora.adam_state_bytes(1000) == 8000
    with pytest.raises(ValueError, match="rank"):
        lora.LoRALinear(torch.nn.Linear(4, 4), rank=5)


def test_kv_cache_gives_the_same_tokens_for_fewer_flops():
    from greenlab.techniques.lm import serving as lm_serve

    model = tiny()
    prompts = torch.randint(0, 256, (3, 5))
    a = lm_serve.generate(model, prompts, 10, kv_cache=True)
    b = lm_serve.generate(model, prompts, 10, kv_cache=False)
    assert a.shape == (3, 10) and torch.equal(a, b)
    assert lm_serve.generation_flops(model, prompts, 10, True) < lm_serve.generation_flops(model, prompts, 10, False)
    assert lm_serve.kv_cache_bytes(model, 3, 15) == 2 * 2 * 3 * 15 * 16 * 4
    with pytest.raises(ValueError, match="max_seq_len"):
        lm_serve.generate(model, prompts, 30)
    run = lm_serve.measure_generation(model, prompts, 4, sources=[_counter()])
    assert run.tokens == 12 and run.joules_per_token == pytest.approx(run.joules / 12)


def test_compare_generation_pairs_repeats_in_rotated_order(monkeypatch):
    from greenlab.techniques.lm import serving as lm_serve

    model = tiny()
    prompts = torch.randint(0, 256, (2, 5))
    order = []
    real = lm_serve.measure_generation

    def spy(**kw):
        order.append(kw["label"])
        return real(**kw)

    monkeypatch.setattr(lm_serve, "measure_generation", spy)
    setups = {"no cache": dict(model=model, prompts=prompts, new_tokens=3, kv_cache=False),
              "cache": dict(model=model, prompts=prompts, new_tokens=3, kv_cache=True, repeats=2)}
    cmp = lm_serve.compare_generation(setups, repeats=3, sources=[_counter()])
    # one discarded warm-up of each first, then the order rotated each repeat
    assert order == ["no cache", "cache"] + ["no cache", "cache", "cache", "no cache", "no cache", "cache"]
    assert cmp.names == ["no cache", "cache"] and [len(cmp.runs[n]) for n in cmp.names] == [3, 3]
    assert [r.tokens for r in cmp.runs["cache"]] == [12, 12] + [12]
    assert cmp.estimated is True  # the fake counter says it is an estimate, and that carries through
    assert cmp.mean("cache") == pytest.approx(sum(r.joules_per_token for r in cmp.runs["cache"]) / 3)
    assert "cache" in cmp.verdict("cache") and "energy" in cmp.verdict("cache")
    with pytest.raises(ValueError, match="unknown set-up"):
        cmp.verdict("int8")
    with pytest.raises(ValueError, match="metric"):
        cmp.mean("cache", metric="watts")
    with pytest.raises(ValueError, match="model"):
        lm_serve.compare_generation({"a": dict(prompts=prompts), "b": dict(model=model)})
    with pytest.raises(ValueError, match="at least two"):
        lm_serve.compare_generation({"a": setups["cache"]})


def test_int8_weights_quarter_the_block_weights_and_stay_close():
    pytest.importorskip("torchao")  # a dependency: installed wherever the course is
    from greenlab.techniques.lm import serving as lm_serve

    model = tiny()
    q = lm_serve.quantize_weights_int8(tiny())
    linears = [m for m in model.blocks.modules() if isinstance(m, torch.nn.Linear)]
    block_weights = sum(m.weight.numel() for m in linears)
    rows = sum(m.out_features for m in linears)
    # 1 byte instead of 4 per weight, plus an fp32 scale and an int8 zero point per output row
    assert lm_serve.weight_bytes(model) - lm_serve.weight_bytes(q) == 3 * block_weights - 5 * rows
    layout = lm_serve.int8_layout(q)
    assert (layout.rows, layout.values, layout.row_bytes) == (rows, block_weights, 5)
    assert layout.row_dtypes == ("float32", "int8") and layout.describe() == "5 bytes per row (float32, int8)"
    with pytest.raises(ValueError, match="no linear weight stored as int8"):
        lm_serve.int8_layout(model)
    assert type(q.head.weight) is torch.nn.Parameter and q.head.weight is q.tok.weight  # tied, fp32
    w, ref = q.blocks[0].qkv.weight, model.blocks[0].qkv.weight.detach()
    assert w.qdata.dtype == torch.int8
    assert torch.allclose(w.scale.flatten(), ref.abs().amax(dim=1) / 127.5)
    assert (w.dequantize() - ref).abs().le(w.scale / 2 + 1e-7).all()  # round to nearest
    x = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        assert torch.allclose(q(x), model(x), atol=0.05)
    prompts = torch.randint(0, 256, (2, 4))
    assert lm_serve.generate(q, prompts, 6).shape == (2, 6)
    assert lm_serve.serving_break_even_tokens(500, 0.002) == pytest.approx(250_000)


def test_a_torchao_without_layout_versions_still_quantizes(monkeypatch):
    """Colab's torchao (0.10) has no ``version`` argument: its one layout is used, and int8_layout
    reads whatever was stored."""
    pytest.importorskip("torchao")
    import torchao.quantization as quantization

    from greenlab.techniques.lm import serving as lm_serve

    real, asked = quantization.Int8WeightOnlyConfig, []

    def without_versions(**kwargs):
        asked.append(sorted(kwargs))
        if "version" in kwargs:
            raise TypeError("__init__() got an unexpected keyword argument 'version'")
        return real(**kwargs)

    monkeypatch.setattr(quantization, "Int8WeightOnlyConfig", without_versions)
    q = lm_serve.quantize_weights_int8(tiny())
    assert asked == [["set_inductor_config", "version"], ["set_inductor_config"]]
    layout = lm_serve.int8_layout(q)
    assert layout.values == sum(m.weight.numel() for m in tiny().blocks.modules() if isinstance(m, torch.nn.Linear))
    assert layout.row_bytes > 0


def test_weight_bytes_counts_each_storage_once():
    from greenlab.techniques.lm import serving as lm_serve

    model = tiny()
    values = sum(p.numel() for p in model.parameters())  # the tied head counted once
    assert lm_serve.weight_bytes(model) == 4 * values
    with pytest.raises(ValueError, match="blocks"):
        lm_serve.quantize_weights_int8(torch.nn.Linear(4, 4))


def test_without_torchao_int8_says_it_is_missing(monkeypatch):
    import sys

    from greenlab.techniques.lm import serving as lm_serve
    from greenlab.base import optional

    monkeypatch.setitem(sys.modules, "torchao", None)  # import torchao now raises ImportError
    assert optional.missing("torchao") == "torchao is not installed"
    with pytest.raises(optional.LibraryMissing, match="int8 weights need torchao: torchao is not installed"):
        lm_serve.quantize_weights_int8(tiny())


def test_stdlib_source_corpus_is_python_code():
    code_text = lm.load_corpus("stdlib-source", max_bytes=20_000)
    assert "def " in bytes(code_text.train.tolist()).decode("utf-8", errors="ignore")
    assert "PSF" in code_text.licence


def test_lora_checker():
    assert checks.lora_trainable_params(lambda i, o, r: r * (i + o)).passed
    wrong = checks.lora_trainable_params(lambda i, o, r: i * o)
    assert not wrong.passed and "frozen weight" in wrong.text()


def test_a_learner_attention_and_block_runner_compute_the_library_model():
    import functools

    torch.manual_seed(0)
    model = lm.TinyGPT(d_model=16, n_layers=3, n_heads=2, max_seq_len=16)
    x = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        want = model(x)

    def by_hand(q, k, v):
        mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).triu(1)
        return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(mask, float("-inf")).softmax(-1) @ v

    lm.use_attention(model, by_hand)
    with torch.no_grad():
        assert torch.allclose(model(x), want, atol=1e-5)
    lm.use_attention(model)
    assert all(b.attention is lm.causal_attention for b in model.blocks)
    with pytest.raises(ValueError, match="attention"):
        lm.use_attention(model, "sdpa")
    for segment in (1, 2, 3):
        model.run_blocks = functools.partial(lm.checkpoint_blocks, segment=segment)
        assert torch.allclose(model(x), want, atol=1e-5)
    with pytest.raises(ValueError, match="segment"):
        lm.checkpoint_blocks(model.blocks, torch.zeros(1, 2, 16), segment=0)


def test_plain_verdict_has_no_interval_figures():
    from greenlab.experiments import paired

    lower = paired([0.5, 0.52, 0.49], [1.0, 1.0, 1.0], "joules", "a", "b")
    assert lm.plain_verdict(lower) == "about 50% lower"
    same = paired([0.9, 1.2, 1.0], [1.0, 1.0, 1.0], "joules", "a", "b")
    assert lm.plain_verdict(same) == "no detectable difference"
    assert lm.plain_verdict(paired([1.0], [2.0], "joules")) == "too few repeats to tell"
    assert "emulated" in lm.explain_bf16(lower, native=False)
    assert "less energy" in lm.explain_bf16(lower, native=True)
    assert "more energy" in lm.explain_bf16(paired([1.5, 1.55, 1.52], [1.0] * 3, "joules"), native=True)
    assert "no detectable difference" in lm.explain_bf16(same, native=True)


def test_tune_lr_gives_each_rate_one_run_and_counts_the_bill_in_one_window():
    import warnings

    from greenlab.energy import ShortWindowWarning

    corpus = lm.load_corpus(max_bytes=20_000)
    cfg = lm.LMConfig(seq_len=16, batch_size=4, steps=3, eval_every=3, eval_batches=1, score_batches=1, label="trial")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShortWindowWarning)
        best, runs, joules = lm.tune_lr(lambda c: lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=16),
                                        corpus, cfg, (1e-3, 1e-2))
    assert set(runs) == {1e-3, 1e-2} and best == min(runs, key=lambda r: runs[r].val_loss)
    assert joules >= 0.999 * sum(r.joules for r in runs.values())  # one window around the trials: theirs and more
    assert all(r.final_val_loss is None for r in runs.values())  # no yardstick scoring: no ranking uses it
    # the 3-step trials' own windows are too short to read, and their figures are not summed: no warning
    # names them (the enclosing window may warn for itself)
    assert not [w for w in caught if "'trial'" in str(w.message)]
    with pytest.raises(ValueError, match="rates"):
        lm.tune_lr(lambda c: None, corpus, cfg, ())


def test_a_diverged_trial_still_costs_its_steps_in_the_search_bill(corpus, monkeypatch):
    real = lm.training.train_step

    def nan_at_the_high_rate(model, optimizer, x, y, precision):
        loss = real(model, optimizer, x, y, precision)
        return loss * float("nan") if optimizer.defaults["lr"] > 0.05 else loss

    monkeypatch.setattr(lm.training, "train_step", nan_at_the_high_rate)
    cfg = lm.LMConfig(seq_len=16, batch_size=4, steps=3, eval_every=3, eval_batches=1)
    model_fn = lambda c: lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=16)  # noqa: E731
    best, runs, joules = lm.tune_lr(model_fn, corpus, cfg, (1e-3, 1e-1))
    assert runs[1e-1] is None and best == 1e-3
    with pytest.raises(FloatingPointError, match="step 1; lower lr") as raised:
        lm.train_lm(model_fn(cfg), corpus, dataclasses.replace(cfg, lr=1e-1))
    partial = raised.value.run  # the window closed at the diverging step: what it cost is known
    assert partial.status == "diverged" and partial.steps == 1 and partial.joules > 0 and partial.history == []
    assert joules >= 0.999 * (runs[1e-3].joules + partial.joules)  # the search's bill counts the diverged trial too


def test_pipeline_bytes_per_rank_is_a_middle_stage():
    # a middle stage sends its output forward and its input's gradient back: 2 x b x L x d x 4 bytes
    assert sharding.pipeline_bytes_per_rank_per_step(2, 8, 4, stages=8) == 2 * 2 * 8 * 4 * 4
    assert sharding.pipeline_bytes_per_rank_per_step(2, 8, 4, stages=2) == 2 * 8 * 4 * 4
    assert sharding.pipeline_bytes_per_rank_per_step(2, 8, 4, stages=1) == 0


def test_ctrl_c_during_train_lm_is_one_line_and_keeps_the_partial_run(corpus, monkeypatch):
    """Kernel > Interrupt in a train_lm cell: gl.Interrupted (one line in a notebook set up by
    gl.setup()), the window closed, the steps and evaluations so far in gl.last_interrupted()."""
    from greenlab.base.interrupts import Interrupted, last_interrupted

    real, calls = lm.train_step, []

    def interrupt_on_the_seventh(*args, **kwargs):
        calls.append(1)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lm.training, "train_step", interrupt_on_the_seventh)
    cfg = lm.LMConfig(seq_len=16, batch_size=4, steps=20, eval_every=3, eval_batches=1, label="probe",
                      score_batches=2)
    with pytest.raises(Interrupted) as caught:
        lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()])
    line = str(caught.value)
    assert "\n" not in line and line.startswith("greenlab.lm.train_lm: interrupted 'probe' at step 7 of 20")
    run = last_interrupted()
    assert run is caught.value.result and run.status == "interrupted" and run.steps == 7
    assert [row["step"] for row in run.history] == [3, 6] and run.final_val_loss is None
    assert run.joules > 0 and run.seconds > 0


class _SetAfter:
    """A stop event that reads as set from its (n + 1)-th check on."""

    def __init__(self, n):
        self.n, self.checks = n, 0

    def is_set(self):
        self.checks += 1
        return self.checks > self.n


def test_a_stop_event_ends_train_lm_before_its_next_step_with_status_stopped(corpus):
    cfg = lm.LMConfig(seq_len=16, batch_size=4, steps=20, eval_every=3, eval_batches=1, score_batches=1)
    run = lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()], stop_event=_SetAfter(5))
    assert run.status == "stopped" and run.steps == 5 and run.tokens == 5 * 16 * 4
    assert [row["step"] for row in run.history] == [3] and run.final_val_loss is not None
    assert lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()],
                       stop_event=_SetAfter(0)).steps == 0
    assert lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[_counter()]).status == "completed"
    with pytest.raises(TypeError, match="stop_event"):
        lm.train_lm(tiny(), corpus, cfg, device="cpu", stop_event=True)


def test_a_generation_verdict_refuses_a_window_too_short_to_read():
    from types import SimpleNamespace

    from greenlab.techniques.lm import serving as lm_serve

    def run(joules, short):
        return lm_serve.GenerationRun("x", tokens=10, seconds=1.0, joules=joules,
                                      energy=SimpleNamespace(short=short, estimated=True))
    cmp = lm_serve.GenerationComparison(["no cache", "cache"],
                                        {"no cache": [run(4.0, False), run(4.2, True), run(3.9, False)],
                                         "cache": [run(1.0, False), run(1.1, False), run(1.0, False)]})
    energy = cmp.paired("cache")
    assert energy.short_windows == 1 and energy.detectable is None and "not measurable" in energy.sentence()
    assert cmp.paired("cache", metric="tokens_per_second").short_windows == 0
