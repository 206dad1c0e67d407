"""`greenlab measure -- CMD`: exit codes pass through, errors are clear, JSON parses."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from greenlab.cli.measure import measure_main

ROOT = Path(__file__).resolve().parents[1]
EXIT3 = [sys.executable, "-c", "import sys; sys.exit(3)"]


def args(cmd, json_out=False, region="WORLD", pue=None, attribution=None):
    return argparse.Namespace(cmd=cmd, json=json_out, region=region, pue=pue, attribution=attribution)


def test_exit_code_passes_through(capsys):
    assert measure_main(args(["--", *EXIT3])) == 3
    report = capsys.readouterr().err
    assert "exit code  3" in report and "duration" in report and "cpu" in report


def test_json_report(capsys):
    assert measure_main(args(["--", sys.executable, "-c", "pass"], json_out=True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exit_code"] == 0
    assert report["components"]["cpu"]["joules"] > 0
    assert report["sources"]["cpu"] in ("rapl", "estimate")


def test_command_not_found_and_no_command(capsys):
    assert measure_main(args(["--", "greenlab-no-such-command-xyz"])) == 127
    assert "command not found" in capsys.readouterr().err
    assert measure_main(args([])) == 2
    assert measure_main(args(["--"])) == 2
    assert "usage" in capsys.readouterr().err


def test_via_cli_main():
    from greenlab.cli import app as cli

    assert cli.main(["measure", "--", *EXIT3]) == 3


def test_via_subprocess():
    script = Path(sys.executable).parent / "greenlab"  # the console script beside this Python
    launcher = [str(script)] if script.exists() else [sys.executable, "-m", "greenlab.cli"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([*launcher, "measure", "--", *EXIT3], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "exit code  3" in proc.stderr


def test_attribution_reaches_the_cpu_estimate(capsys):
    for how in ("machine", "process"):
        assert measure_main(args(["--", sys.executable, "-c", "pass"], json_out=True, attribution=how)) == 0
        report = json.loads(capsys.readouterr().out)
        cpu = report["components"]["cpu"]
        # an estimate counts whose CPU time it was told to; a RAPL counter is machine-wide anyway
        assert cpu["attribution"] == (how if report["sources"]["cpu"] == "estimate" else "machine")
    assert measure_main(args(["--", sys.executable, "-c", "pass"], attribution="everyone")) == 2
    assert "--attribution" in capsys.readouterr().err


def test_attribution_flag_on_the_command_line(capsys):
    from greenlab.cli import app as cli

    assert cli.main(["measure", "--json", "--attribution", "machine", "--", sys.executable, "-c", "pass"]) == 0
    assert json.loads(capsys.readouterr().out)["exit_code"] == 0
    with pytest.raises(SystemExit):
        cli.main(["measure", "--attribution", "everyone", "--", sys.executable, "-c", "pass"])
