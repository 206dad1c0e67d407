"""``%load_ext greenlab``: ``%%energy`` and ``%energy_meter`` in a real IPython shell."""

import subprocess
import sys
import time

import pytest

pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from greenlab.widgets import magics  # noqa: E402
from greenlab.energy import measure  # noqa: E402

from fakes import SlopeSource  # noqa: E402


@pytest.fixture
def shell(monkeypatch):
    """A fresh shell with the extension loaded, measuring with a fake 10 W meter."""
    meter = SlopeSource(10.0)
    meter.update_period_s = 0.01  # windows under 0.1 s are too short
    monkeypatch.setattr(magics, "measure", lambda label, **kw: measure(
        label, sources=[meter], sync=False))
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "greenlab")
    yield sh
    sh.run_line_magic("energy_meter", "off")
    sh.run_line_magic("unload_ext", "greenlab")
    InteractiveShell.clear_instance()


class SleepClock:
    """A fake ``time.perf_counter`` that moves only when the cell sleeps: the window's seconds
    and the 10 W meter's joules are then exact, however busy the machine is."""

    def __init__(self):
        self.now = 500.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_energy_cell_runs_the_cell_and_reads_out(shell, capsys, monkeypatch):
    clock = SleepClock()
    monkeypatch.setattr(time, "perf_counter", clock)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    result = shell.run_cell("%%energy --region FR\nimport time\ntime.sleep(0.2)\nz = 6 * 7\nz")
    assert result.success and result.result == 42
    assert shell.user_ns["z"] == 42
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("energy: ") and "mean 10 W" in first and "CO2e (FR)" in first
    assert "cpu" in out and "estimate" in out and "+-0%" in out
    m = shell.user_ns["_energy"]
    assert m.seconds == pytest.approx(0.2) and m.joules == pytest.approx(10.0 * 0.2)
    assert "INCOMPLETE" not in out


def test_energy_cell_reads_out_even_when_interrupted(shell, capsys):
    result = shell.run_cell("%%energy\nimport time\ntime.sleep(0.05)\nraise KeyboardInterrupt")
    assert isinstance(result.error_in_exec, KeyboardInterrupt)  # the cell still fails
    out = capsys.readouterr().out
    assert out.startswith("energy: ") and shell.user_ns["_energy"].joules > 0


def test_energy_cell_error_propagates_after_the_readout(shell, capsys):
    result = shell.run_cell("%%energy\n1 / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert "energy: " in capsys.readouterr().out


def test_incomplete_cell_says_so(shell, capsys, monkeypatch):
    monkeypatch.setattr(magics, "measure", lambda label, **kw: measure(label, sources=[],
                                                                         sync=False))
    shell.run_cell("%%energy\nx = 1")
    out = capsys.readouterr().out
    assert "INCOMPLETE: no energy sources were given" in out


def test_bad_options_fail_before_the_cell_runs(shell):
    result = shell.run_cell("%%energy --region NOWHERE\nran = True")
    assert result.error_in_exec is not None and "ran" not in shell.user_ns
    result = shell.run_cell("%%energy --attribution everyone\nran = True")
    assert isinstance(result.error_in_exec, ValueError) and "ran" not in shell.user_ns


def test_meter_prints_one_line_after_every_cell_until_off(shell, capsys):
    shell.run_line_magic("energy_meter", "on --region GB")
    capsys.readouterr()
    shell.run_cell("import time; time.sleep(0.15)")
    shell.run_cell("x = 2")
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[energy]")]
    assert len(lines) == 2 and "CO2e (GB)" in lines[0] and "cpu" in lines[0]
    assert "too short to trust" in lines[1]  # the tiny cell is flagged, not trusted
    shell.run_line_magic("energy_meter", "off")
    shell.run_cell("y = 3")
    assert "[energy]" not in capsys.readouterr().out


def test_meter_reads_out_an_interrupted_cell(shell, capsys):
    shell.run_line_magic("energy_meter", "on")
    shell.run_cell("raise KeyboardInterrupt")
    assert "[energy]" in capsys.readouterr().out


def test_import_greenlab_does_not_need_ipython():
    code = ("import sys; sys.modules['IPython'] = None; import greenlab; "
            "assert callable(greenlab.load_ipython_extension); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
