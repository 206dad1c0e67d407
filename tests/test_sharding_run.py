"""greenlab.sharding_run: DDP against FSDP in two real torchrun/gloo processes, bytes per rank counted.

One launch (module fixture) with a model whose first dimensions are odd, so FSDP has to pad its
shards; the byte counts are compared with what the shapes say exactly."""

import math
import os
import time

import pytest
import torch

from greenlab.techniques import ddp
from greenlab.techniques.ddp import launch
from greenlab.techniques import lm
from greenlab.techniques.lm import sharding, sharding_run
from launches import live_processes_naming, record_launches

# d_model 15 and 33 positions: most first dimensions (15, 45, 60, 33) do not divide by 2
SHAPE = {"d_model": 15, "n_layers": 2, "n_heads": 3, "max_seq_len": 33}
WORLD = 2
REPEATS = 3


@pytest.fixture(scope="module")
def run():
    return sharding_run.run_ddp_vs_fsdp(world_size=WORLD, seq_len=32, batch_size=4, steps=3,
                                        allreduce_repeats=REPEATS, timeout_s=240, **SHAPE)


@pytest.fixture(scope="module")
def shapes():
    torch.manual_seed(0)
    return [tuple(p.shape) for p in lm.TinyGPT(**SHAPE).parameters()]


def _rows(shape) -> tuple:
    """(rows, elements per row) of a parameter as FSDP shards it: along its first dimension."""
    return shape[0], math.prod(shape[1:])


# --- the measured launch ------------------------------------------------------------------------


def test_ddp_holds_exactly_zero_stage_0_on_every_rank(run, shapes):
    n = sum(math.prod(s) for s in shapes)
    assert run.n_params == n and run.n_tensors == len(shapes) == 28
    for rank in range(WORLD):
        assert run.bytes_per_rank("ddp", rank) == sharding.zero_bytes_per_rank(n, WORLD, 0)
        assert run.memory["ddp"][rank]["optimizer_steps"] == 4 * len(shapes)  # one fp32 scalar per tensor


def test_fsdp_holds_padded_shards_of_params_and_grads_and_exact_shards_of_optimizer_state(run, shapes):
    padded_elements = sum(math.ceil(rows / WORLD) * per_row for rows, per_row in map(_rows, shapes))
    for rank in range(WORLD):
        held = run.memory["fsdp"][rank]
        assert held["params"] == 4 * padded_elements
        assert held["grads"] == 4 * padded_elements
        # AdamW's moments are made like the local shard, without the padding (torch.chunk's split)
        own = sum(max(0, min(math.ceil(rows / WORLD), rows - rank * math.ceil(rows / WORLD))) * per_row
                  for rows, per_row in map(_rows, shapes))
        assert held["optimizer"] == 8 * own
        assert held["optimizer_steps"] == 4 * len(shapes)  # not sharded


def test_fsdp_is_zero_stage_3_plus_padding(run, shapes):
    zero3 = sharding.zero_bytes_per_rank(run.n_params, WORLD, 3)
    padding = run.padding_bytes()
    assert padding > 0, "this model's odd first dimensions must be padded"
    for rank in range(WORLD):
        total = run.bytes_per_rank("fsdp", rank)["total"]
        assert zero3["total"] - 8 <= total <= zero3["total"] + padding  # rounding of n / 2 vs rows
        assert total < 0.55 * run.bytes_per_rank("ddp", rank)["total"]
    fsdp_all = sum(run.bytes_per_rank("fsdp", r)["total"] for r in range(WORLD))
    assert fsdp_all == run.bytes_per_rank("ddp")["total"] + padding


def test_ddp_and_fsdp_train_to_the_same_losses_and_parameters(run):
    assert run.losses_match()
    assert len(run.losses["ddp"]) == 3 and run.losses["ddp"][-1] < run.losses["ddp"][0]
    assert run.max_param_difference <= 1e-5
    assert all(len(run.step_seconds[k]) == 3 and min(run.step_seconds[k]) > 0 for k in ("ddp", "fsdp"))


def test_allreduce_of_the_gradients_is_timed_and_its_bytes_counted(run):
    a = run.allreduce
    assert a["payload_bytes"] == 4 * run.n_params
    assert len(a["seconds"]) == REPEATS and min(a["seconds"]) > 0
    assert run.ring_bytes == sharding.ring_allreduce_bytes(a["payload_bytes"], WORLD) == a["payload_bytes"]
    if os.path.exists("/proc/self/io"):
        assert len(a["bytes_written"]) == WORLD and all(len(r) == REPEATS for r in a["bytes_written"])
        for per_rank in a["bytes_written"]:  # the payload once, plus gloo's message headers
            assert all(run.ring_bytes <= b <= run.ring_bytes + 16384 for b in per_rank), per_rank
        assert run.bytes_written is not None


def test_launch_times_add_up_and_summary_reads(run):
    assert 0 < run.startup_seconds and 0 < run.work_seconds
    assert run.startup_seconds + run.work_seconds <= run.wall_seconds
    text = run.summary()
    for words in ("DDP rank 1 measured", "FSDP rank 0 measured", "ZeRO stage 0 arithmetic",
                  "ZeRO stage 3 arithmetic", "2(N-1)/N", "start-up"):
        assert words in text
    assert str(run) == text and run.to_dict()["n_params"] == run.n_params


# --- counting held bytes (no processes) ---------------------------------------------------------


def test_held_bytes_counts_each_storage_once():
    a = torch.zeros(10)
    assert sharding_run.held_bytes([a, a[2:5], a.view(2, 5), None]) == 40
    assert sharding_run.held_bytes([torch.zeros(3, dtype=torch.float64), torch.zeros(4)]) == 24 + 16
    assert sharding_run.held_bytes([]) == 0
    model = lm.TinyGPT(**SHAPE)
    assert model.head.weight is model.tok.weight  # tied: one storage
    tensors = [model.tok.weight, model.head.weight]
    assert sharding_run.held_bytes(tensors) == 4 * model.tok.weight.numel()


# --- bad input, failures, timeouts (fast) -------------------------------------------------------


@pytest.mark.parametrize("kwargs, words", [
    ({"world_size": 1}, "world_size"),
    ({"world_size": True}, "world_size"),
    ({"world_size": 10_000}, "world_size"),
    ({"d_model": 10, "n_heads": 4}, "multiple of n_heads"),
    ({"seq_len": 300}, "seq_len"),
    ({"steps": 0}, "steps"),
    ({"batch_size": -1}, "batch_size"),
    ({"lr": 0}, "lr"),
    ({"allreduce_repeats": 0}, "allreduce_repeats"),
    ({"corpus": "wikipedia"}, "corpus"),
    ({"seed": -1}, "seed"),
])
def test_bad_input_names_the_argument_before_launching(kwargs, words):
    with pytest.raises(ValueError, match=words):
        sharding_run.make_config(**kwargs)
    with pytest.raises(ValueError, match=words):
        sharding_run.run_ddp_vs_fsdp(**kwargs, timeout_s=1)


def test_world_size_is_capped_by_the_machines_cores(monkeypatch):
    monkeypatch.setattr(sharding_run.os, "cpu_count", lambda: 2)
    assert sharding_run.make_config(world_size=8)["world_size"] == 8
    with pytest.raises(ValueError, match="at most 4 x this machine's 2 CPU cores"):
        sharding_run.make_config(world_size=9)


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), "10"])
def test_bad_timeout(timeout_s):
    with pytest.raises(ValueError, match="timeout_s"):
        sharding_run.run_ddp_vs_fsdp(timeout_s=timeout_s)


def test_timeout_kills_every_worker_and_says_so(monkeypatch):
    configs = record_launches(monkeypatch, launch)
    with pytest.raises(ddp.DDPError, match="killed after its timeout of 0.5 s"):
        # the most steps the run takes: it cannot finish in 0.5 s even if this process stalls meanwhile
        sharding_run.run_ddp_vs_fsdp(timeout_s=0.5, steps=1000)
    time.sleep(0.2)
    assert len(configs) == 1
    left = live_processes_naming(configs[0])  # workers outlive torchrun as orphans, no child of ours
    assert not left, f"processes left running: {left}"


def test_worker_failure_is_written_for_the_parent(tmp_path, monkeypatch):
    config = sharding_run.make_config()
    config.update(error_dir=str(tmp_path), result_path=str(tmp_path / "result.json"), launched=0.0)
    path = tmp_path / "config.json"
    path.write_text(__import__("json").dumps(config), encoding="utf-8")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(RuntimeError, match="3 workers but the config asks for 2"):
        sharding_run.worker_main(["--config", str(path)])
    assert "3 workers" in (tmp_path / "error.rank0.txt").read_text(encoding="utf-8")
    with pytest.raises(ddp.DDPError, match="rank 0: RuntimeError: torchrun started 3 workers"):
        ddp.collect_result(tmp_path, tmp_path / "result.json", 2, 1, "", 10.0)


def test_stages_take_the_sharded_pieces_from_fsdp_and_the_rest_from_ddp(run):
    ddp_held, fsdp_held = run.bytes_per_rank("ddp", 1), run.bytes_per_rank("fsdp", 1)
    stages = run.stages(1)
    assert stages[0] == ddp_held and stages[3] == fsdp_held
    assert stages[1]["params"] == ddp_held["params"] and stages[1]["grads"] == ddp_held["grads"]
    assert stages[1]["optimizer"] == fsdp_held["optimizer"]
    assert stages[2]["grads"] == fsdp_held["grads"] and stages[2]["params"] == ddp_held["params"]
    totals = [stages[s]["total"] for s in range(4)]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    with pytest.raises(ValueError, match="rank"):
        run.stages(2)
