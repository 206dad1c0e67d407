"""One torchrun worker for tests/test_energy_distributed.py (not a test module itself).

Opens collective windows over a little CPU work and writes rank_<r>.json into $GL_TEST_OUT with
this rank's own figures and the reduced result. Sources are fakes with known scopes:

- ``cpu`` (process scope): 10 J per CPU-second of this process;
- ``dram`` (node scope): 5 J per wall-clock second, the same counter for every rank of a node;
- ``gpu:0`` (device scope): 2 J per wall-clock second, device id ``fake-gpu-<node>``, shared by
  the ranks of a node.

``GL_TEST_FAIL="1:discover,2:end"`` makes rank 1 fail to find any source (so it measures
nothing) and rank 2's ``cpu`` source raise at its second read (window end); ``start`` raises at
the first read. ``GL_TEST_REAL=1`` adds a window over this machine's own sources, ``GL_TEST_TRAIN=1`` a tiny
``gl.train`` run on every rank.
"""

import json
import os
import sys
import time
from pathlib import Path

import torch.distributed as dist

from greenlab.energy import measure
from greenlab.energy import distributed
from greenlab.energy.distributed import node_id
from greenlab.energy.sources import EnergySource


class ProcessCpu(EnergySource):
    name = "fake-process"
    estimated = True
    rel_uncertainty = 0.5
    scope = "process"

    def __init__(self, fail_at_read=None):
        super().__init__("cpu")
        self.reads = 0
        self.fail_at_read = fail_at_read

    def read_joules(self):
        self.reads += 1
        if self.reads == self.fail_at_read:
            raise OSError("injected read failure")
        return 10.0 * time.process_time()


class NodeDram(EnergySource):
    name = "fake-node"
    scope = "node"
    rel_uncertainty = 0.1

    def __init__(self):
        super().__init__("dram")

    def read_joules(self):
        return 5.0 * time.time()


class SharedGpu(EnergySource):
    name = "fake-gpu"
    scope = "device"
    rel_uncertainty = 0.05

    def __init__(self):
        super().__init__("gpu:0")
        self.device_id = f"fake-gpu-{node_id()}"

    def read_joules(self):
        return 2.0 * time.time()


def fail_to_discover():
    raise PermissionError("injected discovery failure")


def busy(seconds):
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1
    return x


def main():
    out = Path(os.environ["GL_TEST_OUT"])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    plan = dict(item.split(":") for item in os.environ.get("GL_TEST_FAIL", "").split(",") if item)
    fail_at = {"start": 1, "end": 2}.get(plan.get(str(rank), ""))
    sources = [ProcessCpu(fail_at), NodeDram(), SharedGpu()]
    if plan.get(str(rank)) == "discover":
        distributed.rank_sources = fail_to_discover
        sources = None
    window = measure("fake", sources=sources, distributed=True)
    with window:
        busy(0.05 * (rank + 1))  # unequal work, so a sum cannot pass by symmetry
    report = {"rank": rank, "node": node_id(),
              "local": window.local_result.to_dict() if window.local_result else None,
              "reduced": window.result.to_dict(), "reduced_summary": window.result.summary()}
    if os.environ.get("GL_TEST_REAL") == "1":
        real = measure("real", distributed=True)
        with real:
            busy(0.1)
        report["real_local"] = real.local_result.to_dict()
        report["real_reduced"] = real.result.to_dict()
    if os.environ.get("GL_TEST_TRAIN") == "1":  # gl.train's window is collective by itself
        import greenlab as gl

        ds = gl.data.load("synthetic", n_train=64, n_test=16, verbose=False)
        net = gl.models.build("mlp", hidden=[8], input_shape=ds.input_shape, num_classes=10)
        run = gl.train(net, ds, gl.TrainConfig(batch_size=16, max_steps=2), log=False, save=False,
                       device="cpu")
        report["train_energy"] = run.energy.to_dict()
    (out / f"rank_{rank}.json").write_text(json.dumps(report), encoding="utf-8")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
