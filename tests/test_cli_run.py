"""Tests for `greenlab run`: a tiny headless run, and clear errors with exit code 2."""

import pytest

from greenlab.session import config
from greenlab.base import results
from greenlab.cli.app import main


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "_current", None)


TINY = ["--dataset", "synthetic", "--model", "mlp", "--n-train", "120", "--n-test", "40", "--batch-size", "40"]


def test_run_prints_a_results_table_and_logs_runs(capsys):
    rc = main(["run", *TINY, "--precision", "fp32,bf16", "--max-steps", "2", "--quick"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "variant" in out and "fp32" in out and "bf16" in out and "energy J" in out
    assert "quick mode on" in out
    assert "too few repeats for an interval" in out  # the table's verdict, 1 repeat
    assert "bf16 against fp32: too few repeats to tell" in out  # the stakeholder paragraph, in plain words
    assert [r["label"] for r in results.load()] == ["fp32", "bf16"]


def test_no_save_leaves_the_log_alone(capsys):
    assert main(["run", *TINY, "--max-steps", "1", "--no-save"]) == 0
    assert results.load() == []


@pytest.mark.parametrize("extra,message", [
    (["--precision", "fp8"], "fp32, bf16, fp16"),
    (["--batch-size", "0"], "error: --batch-size must"),
    (["--accum", "-1"], "error: --accum must"),
    (["--epochs", "0"], "error: --epochs must"),
    (["--n-train", "-5"], "error: --n-train must"),
    (["--lr", "-1"], "error: --lr must"),
    (["--repeats", "0"], "repeats"),
    (["--target", "1.5"], "(0, 1]"),
    (["--dataset", "imagenet"], "allowed"),
    (["--model", "vgg"], "allowed"),
])
def test_bad_input_exits_2_with_a_message(capsys, extra, message):
    args = list(TINY)
    for i in range(0, len(extra), 2):  # later options win in argparse
        args += extra[i:i + 2]
    assert main(["run", *args, "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "greenlab run: error:" in err and message in err
    assert results.load() == []
