"""The headless runner times each cell's longest silence, so a lesson cell that waits without a word is found."""

import json
import subprocess
import sys

from greenlab.course.headless import run_notebook


def _lesson(tmp_path, *sources):
    cells = [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None, "id": f"c{i}"}
             for i, s in enumerate(sources)]
    path = tmp_path / "99_silence.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


SILENT = "import time\ntime.sleep(3.0)"
CHATTY = "import time\nfor i in range(6):\n    time.sleep(0.1)\n    print('step', i, flush=True)"
HEARTBEAT = ("import time\nfrom greenlab.base import progress\n"
             "with progress.heartbeat('wait', every_s=0.05):\n    time.sleep(0.6)")


def test_a_silent_cell_is_listed_and_cells_that_print_progress_are_not(tmp_path):
    done = run_notebook(_lesson(tmp_path, SILENT, CHATTY, HEARTBEAT), quick=None, echo=False, max_silence_s=2.0)
    # a busy machine can stretch a 0.1 s gap, not into the 2 s the limit allows here
    assert [where for where, _ in done.silences] == ["99_silence.ipynb cell 0 (code cell 1)"]
    assert done.silences[0][1] >= 3.0


def test_the_run_command_fails_on_silence_only_when_asked(tmp_path):
    path = _lesson(tmp_path, SILENT)
    cmd = [sys.executable, "-m", "greenlab.course", "run", str(path)]
    listed = subprocess.run(cmd + ["--max-silence-s", "1"], capture_output=True, text=True, timeout=300)
    assert listed.returncode == 1, listed.stdout + listed.stderr
    assert "silent 99_silence.ipynb cell 0" in listed.stdout
    quiet = subprocess.run(cmd + ["--max-silence-s", "60"], capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
