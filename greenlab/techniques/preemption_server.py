"""The launcher process of ``greenlab.techniques.preemption`` (``python -m`` this module), for lesson 13
(13_operating_training).

It imports torch and greenlab's training loop once, prints ``{"ready": true}``, then reads one
JSON request a line from stdin: ``{"cmd": "life", ...}`` forks a training process for one life
(answering ``{"pid": N}``) and, when that process ends (finished, failed or killed by the parent),
answers ``{"exit": code}`` (the negative signal number when a signal ended it). It ends when
stdin closes, and with the process that started it; each life dies with the server.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

from greenlab.base.processes import die_with_parent
from greenlab.techniques import preemption
from greenlab.training import data, loop, models
from greenlab.training.data import Dataset


def main() -> int:
    die_with_parent()
    import torch  # noqa: F401  (imported once here, inherited by every forked life)

    _warm_up(torch)
    out = sys.stdout
    datasets: dict = {}
    _say(out, {"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        if job.get("cmd") != "life":
            _say(out, {"error": f"unknown request {job.get('cmd')!r}"})
            continue
        if job["data"] not in datasets:
            datasets[job["data"]] = Dataset(**torch.load(job["data"], weights_only=True, map_location="cpu"))
        data = datasets[job["data"]]
        out.flush()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:  # the training process
            code = 0
            try:
                # PR_SET_PDEATHSIG is not inherited through fork: a life sets its own, so that it
                # never outlives the server (which dies with the process that started it)
                die_with_parent(server, signal.SIGKILL)
                log = os.open(os.path.splitext(job["progress"])[0] + ".log",
                              os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)  # nothing it prints may reach the request pipe
                os.dup2(log, 2)
                preemption.life(job, data)
            except BaseException:  # noqa: BLE001  reported in the log, as the exit code says
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _say(out, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _say(out, {"exit": code})
    return 0


def _warm_up(torch) -> None:
    """One tiny training step on one thread, so every life starts with greenlab's lazy imports and
    torch's first-call set-up done (one thread: no OpenMP thread pool exists when a life forks)."""
    import contextlib
    import io

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        tiny = data.load("synthetic", n_train=40, n_test=20, verbose=False)
        loop.train(models.build("mlp", hidden=(8,)), tiny, loop.TrainConfig(batch_size=20, max_steps=1),
                   device="cpu", log=False, save=False)
    torch.set_num_threads(threads)


def _say(out, message: dict) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


if __name__ == "__main__":
    raise SystemExit(main())
