"""Resuming gl.train from a full checkpoint: same weights and history as an uninterrupted run."""

import copy

import pytest
import torch

from greenlab.training import data, models
from greenlab.techniques import profiling
from fakes import SlopeSource
from greenlab.training.loop import StopTraining, TrainConfig, train




class StopAt:
    """Interrupts the run at a given step (after the callbacks before it have run)."""

    def __init__(self, step):
        self.step = step

    def on_step(self, state):
        if state.step == self.step:
            raise StopTraining("simulated crash")


@pytest.fixture(autouse=True)
def results_in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def ds():
    small = data.load("synthetic", n_train=150, n_test=60, verbose=False)
    small.train_x = small.train_x[:, :, :12, :12].contiguous()
    small.test_x = small.test_x[:, :, :12, :12].contiguous()
    small.val_x = small.val_x[:, :, :12, :12].contiguous()
    return small


def _run(model, ds, cfg, **kw):
    return train(model, ds, cfg, log=False, save=False, device="cpu", sources=[SlopeSource()], **kw)


def _no_timing(history):
    return [{k: v for k, v in row.items() if k not in ("seconds", "joules")} for row in history]


def _cnn():
    torch.manual_seed(1)
    return models.build("cnn", num_classes=10, in_channels=1, depth=2, width=8)


def _mlp():
    torch.manual_seed(2)
    return models.build("mlp", input_shape=(1, 12, 12), hidden=(16,))


def _dropout_mlp():  # dropout draws from torch's global generator, which the checkpoint restores
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(144, 32), torch.nn.ReLU(),
                               torch.nn.Dropout(0.3), torch.nn.Linear(32, 10))


CASES = {
    "sgd-accum-eval_every": (_mlp, dict(batch_size=16, accum_steps=2, epochs=2, eval_every=3, lr=0.1), 4),
    "adam-cosine-augment-bn-schedule": (_cnn, dict(batch_size=32, epochs=3, optimizer="adam", lr=0.01,
                                                   lr_schedule="cosine", augment=True,
                                                   batch_schedule=[(0, 32), (1, 50)]), 7),
    "fp16-scaler-warmup": (_mlp, dict(batch_size=25, epochs=2, precision="fp16", lr=0.05,
                                      lr_schedule="warmup-linear", warmup_steps=3), 5),
    "dataloader-epoch-end": (_mlp, dict(batch_size=30, epochs=2, loader="dataloader", augment=True), 5),
    "dropout-mid-epoch-2": (_dropout_mlp, dict(batch_size=20, epochs=2, lr=0.1), 11),
    "max_steps": (_mlp, dict(batch_size=10, epochs=3, max_steps=12, eval_every=4), 8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_resumed_run_equals_uninterrupted_run(name, ds, tmp_path):
    make, kw, k = CASES[name]
    cfg = TrainConfig(**kw)
    start = make()
    full_model = copy.deepcopy(start)
    full = _run(full_model, ds, cfg)

    path = tmp_path / "ck.pt"
    crashed = _run(copy.deepcopy(start), ds, cfg,
                   callbacks=[profiling.CheckpointCallback(path, every_steps=k), StopAt(k)])
    assert crashed.status == "stopped" and crashed.steps == k

    resumed_model = copy.deepcopy(start)
    resumed = _run(resumed_model, ds, cfg, resume_from=path)
    assert resumed.status == full.status
    assert resumed.steps == full.steps and resumed.samples == full.samples
    assert resumed.resumed_from_step == k and resumed.steps_this_session == full.steps - k
    assert resumed.epochs_run == full.epochs_run
    for a, b in zip(full_model.state_dict().values(), resumed_model.state_dict().values()):
        assert torch.equal(a, b)
    assert _no_timing(resumed.history) == _no_timing(full.history)
    assert resumed.final_accuracy == full.final_accuracy


def test_session_and_cumulative_energy(ds, tmp_path):
    cfg = TrainConfig(batch_size=16, epochs=2, lr=0.1)
    start = _mlp()
    fresh = _run(copy.deepcopy(start), ds, cfg)
    assert fresh.resumed_from_step is None and fresh.prior_joules == 0.0
    assert fresh.cumulative_joules == fresh.joules and fresh.cumulative_seconds == fresh.seconds
    assert fresh.steps_this_session == fresh.steps

    path = tmp_path / "ck.pt"
    _run(copy.deepcopy(start), ds, cfg, callbacks=[profiling.CheckpointCallback(path, every_steps=6), StopAt(6)])
    recorded = profiling.load_checkpoint(path)["extra"]["train_state"]
    resumed = _run(copy.deepcopy(start), ds, cfg, resume_from=path)
    assert resumed.prior_joules == pytest.approx(recorded["joules"]) and recorded["joules"] > 0
    assert resumed.prior_seconds == pytest.approx(recorded["seconds"]) and recorded["seconds"] > 0
    # this session's window only: 10 W x its own seconds, not the earlier session's
    assert resumed.joules == pytest.approx(10.0 * resumed.seconds, rel=1e-3)
    assert resumed.cumulative_joules == pytest.approx(resumed.prior_joules + resumed.joules)
    assert resumed.cumulative_seconds == pytest.approx(resumed.prior_seconds + resumed.seconds)
    # history rows are cumulative: the resumed rows continue past the checkpoint's figures
    after = [row for row in resumed.history if row["step"] > 6]
    assert after and all(row["joules"] > recorded["joules"] for row in after)
    assert resumed.samples_this_session == resumed.samples - recorded["samples"]


def test_config_mismatch_names_the_fields(ds, tmp_path):
    cfg = TrainConfig(batch_size=16, epochs=2, lr=0.1, label="a")
    path = tmp_path / "ck.pt"
    _run(_mlp(), ds, cfg, callbacks=[profiling.CheckpointCallback(path, every_steps=3), StopAt(3)])
    with pytest.raises(ValueError, match=r"differs in batch_size, lr \(") as info:
        _run(_mlp(), ds, TrainConfig(batch_size=8, epochs=2, lr=0.2), resume_from=path)
    assert "checkpoint 16 vs config 8" in str(info.value)
    for field in ("precision", "epochs", "seed"):
        other = {"precision": "bf16", "epochs": 3, "seed": 4}[field]
        with pytest.raises(ValueError, match=field):
            changed = {"batch_size": 16, "epochs": 2, "lr": 0.1, field: other}
            _run(_mlp(), ds, TrainConfig(**changed), resume_from=path)
    # a label (or region) does not change the run
    ok = _run(_mlp(), ds, TrainConfig(batch_size=16, epochs=2, lr=0.1, label="b"), resume_from=path)
    assert ok.resumed_from_step == 3
    smaller = copy.copy(ds)
    smaller.train_x, smaller.train_y = ds.train_x[:100], ds.train_y[:100]
    with pytest.raises(ValueError, match="150 samples"):
        _run(_mlp(), smaller, cfg, resume_from=path)
    with pytest.raises(ValueError, match="does not fit"):
        _run(_cnn(), ds, cfg, resume_from=path)


def test_missing_damaged_and_unresumable_files(ds, tmp_path):
    cfg = TrainConfig(batch_size=16, epochs=1, lr=0.1)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        _run(_mlp(), ds, cfg, resume_from=tmp_path / "missing.pt")
    path = tmp_path / "ck.pt"
    _run(_mlp(), ds, cfg, callbacks=[profiling.CheckpointCallback(path, every_steps=3), StopAt(3)])
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        _run(_mlp(), ds, cfg, resume_from=damaged)
    model_only = profiling.save_checkpoint(tmp_path / "model_only.pt", _mlp(), step=3)
    with pytest.raises(ValueError, match="no training state"):
        _run(_mlp(), ds, cfg, resume_from=model_only)
    finished = tmp_path / "finished.pt"
    done = _run(_mlp(), ds, cfg, callbacks=[profiling.CheckpointCallback(finished, every_steps=100)])
    assert done.status == "completed"
    with pytest.raises(ValueError, match="nothing left to resume"):
        _run(_mlp(), ds, cfg, resume_from=finished)
    with pytest.raises(ValueError, match="file path"):
        _run(_mlp(), ds, cfg, resume_from=3)


def test_checkpoint_outside_a_step_is_refused(ds, tmp_path):
    errors = []

    class AtEval:
        def on_eval(self, state):
            try:
                state.checkpoint(tmp_path / "x.pt")
            except ValueError as exc:
                errors.append(str(exc))

    _run(_mlp(), ds, TrainConfig(batch_size=50, epochs=1), callbacks=[AtEval()])
    assert errors and "on_step" in errors[0]
    assert not (tmp_path / "x.pt").exists()
