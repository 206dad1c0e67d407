"""Energy of distributed runs: the reduction rules, and real torchrun/gloo jobs of 2 and 3 CPU
processes (one simulated as two nodes) whose ranks measure fake sources of known scope."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from greenlab.energy import ComponentEnergy, Measurement, measure
from greenlab.energy.distributed import (
    CollectiveWindow, DistributedMeasurement, node_id, rank_record, reduce_records, source_scope)
from greenlab.energy.estimate import IDLE_FRACTION
from greenlab.energy.sources import EnergySource

WORKER = Path(__file__).with_name("distributed_energy_worker.py")
LAUNCH_TIMEOUT_S = 120


# --- the reduction (no processes) -------------------------------------------------------------


class _Scoped(EnergySource):
    def __init__(self, component, scope, device_id=None, name="fake"):
        super().__init__(component)
        self.scope, self.device_id, self.name = scope, device_id, name


def _record(rank, node, figures, ok=True, error="", problems=(), local_rank=None):
    """A rank record from {component: (joules, source object)}."""
    comps = {n: ComponentEnergy(n, s.name, j, 2.0, j / 2.0, False, 0.1) for n, (j, s) in figures.items()}
    m = Measurement("w", 2.0, comps) if ok else None
    return rank_record(m, [s for _, s in figures.values()], error=error, problems=problems,
                       rank=rank, local_rank=rank if local_rank is None else local_rank, node=node)


def test_process_figures_sum_and_shared_figures_count_once_per_node():
    rapl, gpu = _Scoped("cpu", "node", name="rapl"), _Scoped("gpu:0", "device", "GPU-aaa")
    proc = _Scoped("dram", "process")
    recs = [_record(0, "a", {"cpu": (100.0, rapl), "gpu:0": (50.0, gpu), "dram": (3.0, proc)}),
            _record(1, "a", {"cpu": (101.0, rapl), "gpu:0": (51.0, gpu), "dram": (4.0, proc)}),
            _record(2, "b", {"cpu": (80.0, rapl), "dram": (5.0, proc)}, local_rank=0)]
    m = reduce_records(list(reversed(recs)), "job")
    assert isinstance(m, DistributedMeasurement) and m.complete and m.world_size == 3
    assert m.components["cpu"].joules == pytest.approx(101.0 + 80.0)  # once per node, longest window
    assert m.components["gpu"].joules == pytest.approx(51.0)          # one GPU, two ranks
    assert m.components["dram"].joules == pytest.approx(3.0 + 4.0 + 5.0)
    assert m.joules == pytest.approx(181.0 + 51.0 + 12.0)
    assert m.nodes["a"]["ranks"] == [0, 1] and m.nodes["b"]["ranks"] == [2]
    assert m.nodes["a"]["joules"] == pytest.approx(101.0 + 51.0 + 7.0)
    assert m.nodes["b"]["joules_by_kind"] == pytest.approx({"cpu": 80.0, "dram": 5.0})
    gpu_row = [d for d in m.devices if d["kind"] == "gpu"]
    assert len(gpu_row) == 1 and gpu_row[0]["seen_by"] == [0, 1] and gpu_row[0]["rank"] == 1
    assert any("GPU-aaa" in w and "ranks 0, 1" in w and "cannot split" in w for w in m.warnings)
    assert [r["joules"] for r in m.ranks] == pytest.approx([153.0, 156.0, 85.0])
    assert "2 node(s), 3 rank(s)" in m.summary() and "incomplete" not in m.summary()
    assert json.loads(json.dumps(m.to_dict()))["complete"] is True


def test_the_same_gpu_on_two_nodes_is_two_devices():
    a, b = _Scoped("gpu:0", "device", "GPU-1"), _Scoped("gpu:0", "device", "GPU-2")
    m = reduce_records([_record(0, "a", {"gpu:0": (10.0, a)}), _record(1, "b", {"gpu:0": (20.0, b)})])
    assert m.components["gpu"].joules == pytest.approx(30.0)


def test_a_rank_that_failed_makes_the_result_incomplete_and_says_which():
    proc = _Scoped("cpu", "process")
    recs = [_record(0, "a", {"cpu": (10.0, proc)}),
            _record(1, "a", {"cpu": (0.0, proc)}, ok=False, error="window start: OSError: denied")]
    m = reduce_records(recs, "job")
    assert not m.complete
    assert "rank 1 on a failed to measure (window start: OSError: denied)" in m.problems[0]
    assert "incomplete: " in m.summary() and "rank 1" in m.summary()
    assert m.to_dict()["complete"] is False and m.ranks[1]["ok"] is False


def test_a_lost_component_on_one_rank_makes_the_result_incomplete():
    proc = _Scoped("cpu", "process")
    rec = _record(1, "a", {"cpu": (10.0, proc)})
    m = Measurement("w", 2.0, {}, warnings=["cpu: fake failed at window end (boom); left out"])
    lost = rank_record(m, [proc], rank=2, node="a")
    result = reduce_records([_record(0, "a", {"cpu": (10.0, proc)}), rec, lost])
    assert not result.complete
    assert any("rank 2 on a: cpu: fake failed at window end (boom)" in p for p in result.problems)


class _ProcessEstimate(EnergySource):
    name, estimated, attribution, idle_watts = "estimate", True, "process", 4.0


def test_a_process_estimates_idle_share_is_counted_once_per_node():
    """Two ranks each charge the idle share of the CPUs they may use; the node pays it once."""
    est = _ProcessEstimate("cpu")

    def rank(r, node, joules):
        comps = {"cpu": ComponentEnergy("cpu", "estimate", joules, 2.0, joules / 2, True, 1.0)}
        return rank_record(Measurement("w", 2.0, comps), [est], rank=r, node=node)

    m = reduce_records([rank(0, "a", 20.0), rank(1, "a", 30.0), rank(2, "b", 10.0)])
    idle = 4.0 * 2.0  # W x s, the same window on every rank here
    assert m.components["cpu"].joules == pytest.approx((20 - idle) + (30 - idle) + idle + 10.0)
    assert m.nodes["a"]["joules"] == pytest.approx(50.0 - idle)
    assert [r["joules"] for r in m.ranks] == pytest.approx([20.0, 30.0, 10.0])  # each rank's own
    shares = [d for d in m.devices if d.get("part") == "idle share"]
    assert [(d["node"], d["seen_by"]) for d in shares] == [("a", [0, 1]), ("b", [2])]
    assert m.components["cpu"].estimated and m.complete


def test_scopes_are_inferred_from_the_source():
    machine = EnergySource("cpu")
    machine.attribution = "machine"
    assert source_scope(machine) == ("node", None)
    own = EnergySource("cpu")
    own.attribution = "process"
    assert source_scope(own) == ("process", None)
    gpu = _Scoped("gpu:0", "device", "GPU-x")
    assert source_scope(gpu) == ("device", "GPU-x")
    with pytest.raises(ValueError, match="scope must be one of"):
        source_scope(_Scoped("cpu", "rack"))


def test_node_id_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("GREENLAB_NODE_ID", "node-7")
    assert node_id() == "node-7"
    monkeypatch.delenv("GREENLAB_NODE_ID")
    assert node_id() == socket.gethostname()


def test_a_distributed_window_outside_a_process_group_says_so():
    window = measure("x", distributed=True)
    assert isinstance(window, CollectiveWindow)
    with pytest.raises(RuntimeError, match="init_process_group"):
        window.start()
    assert not isinstance(measure("x", distributed=None), CollectiveWindow)  # no group: local


# --- real torchrun jobs (gloo, CPU) ---------------------------------------------------------


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out, nprocs, env=None, nnodes=1, node_rank=0, port=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nprocs}",
           "--max-restarts=0"]
    if nnodes == 1:
        cmd.append("--standalone")
    else:
        cmd += [f"--nnodes={nnodes}", f"--node_rank={node_rank}", "--master_addr=127.0.0.1",
                f"--master_port={port}"]
    full_env = dict(os.environ, GL_TEST_OUT=str(out), OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.Popen(cmd + [str(WORKER)], env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait(*procs):
    for p in procs:
        try:
            text, _ = p.communicate(timeout=LAUNCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, text[-3000:]


def _reports(out, n):
    reports = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(n)]
    for rep in reports[1:]:  # every rank holds the same reduced result
        assert rep["reduced"] == reports[0]["reduced"]
    return reports


def _local(rep, component):
    return rep["local"]["components"][component]["joules"]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("two")
    _wait(_launch(out, 2, env={"GL_TEST_REAL": "1", "GL_TEST_TRAIN": "1", "GREENLAB_NODE_ID": "n0",
                               "GREENLAB_RESULTS_DIR": str(out / "results")}))
    return _reports(out, 2)


def test_two_ranks_reduced_total_is_the_sum_of_their_own_figures(two_ranks):
    r0, r1 = two_ranks
    red = r0["reduced"]
    assert red["complete"] is True and red["world_size"] == 2 and red["problems"] == []
    cpu = _local(r0, "cpu") + _local(r1, "cpu")
    assert _local(r1, "cpu") > _local(r0, "cpu") > 0  # rank 1 worked twice as long
    assert red["components"]["cpu"]["joules"] == pytest.approx(cpu, rel=1e-12)
    dram = max(_local(r, "dram") for r in two_ranks)  # one node counter, the longest window
    gpu = max(_local(r, "gpu:0") for r in two_ranks)  # one GPU, both ranks read it
    assert red["components"]["dram"]["joules"] == pytest.approx(dram, rel=1e-12)
    assert red["components"]["gpu"]["joules"] == pytest.approx(gpu, rel=1e-12)
    assert red["joules"] == pytest.approx(cpu + dram + gpu)
    assert red["nodes"] == {"n0": {"ranks": [0, 1], "joules": pytest.approx(red["joules"]),
                                   "joules_by_kind": pytest.approx(
                                       {k: c["joules"] for k, c in red["components"].items()})}}
    assert [r["pid"] for r in red["ranks"]] != [red["ranks"][0]["pid"]] * 2


def test_two_ranks_with_this_machines_sources(two_ranks):
    """Whatever this machine offers: a per-process estimate's busy parts add up over the ranks
    and its idle share is paid once; node-wide and device figures are taken once."""
    red = two_ranks[0]["real_reduced"]
    assert red["complete"] is True
    for kind, comp in red["components"].items():
        expected = 0.0
        for name, item in two_ranks[0]["real_local"]["components"].items():
            if name.split(":")[0] != kind:
                continue
            own = [rep["real_local"]["components"][name] for rep in two_ranks]
            if item.get("attribution") == "process":
                share = [d for d in red["devices"] if d.get("part") == "idle share"]
                idle_watts = share[0]["idle_watts_model"]
                busy = sum(c["joules"] - idle_watts * c["seconds"] for c in own)
                # capped at what the node's CPUs can do in the window (clock ticks can add past it)
                cap = (share[0]["max_watts_model"] - idle_watts) * share[0]["seconds"]
                expected += min(busy, cap)
                expected += max(idle_watts * c["seconds"] for c in own)
                # two busy ranks on one node cannot exceed the model's own maximum power
                assert comp["watts"] <= idle_watts / IDLE_FRACTION * 1.001
            else:
                expected += max(c["joules"] for c in own)
        assert comp["joules"] == pytest.approx(expected, rel=1e-9)
        assert comp["source"]


def test_gl_train_inside_a_process_group_reports_the_jobs_energy(two_ranks):
    energies = [rep["train_energy"] for rep in two_ranks]
    assert energies[0] == energies[1]  # every rank got the same reduced figure
    e = energies[0]
    assert e["world_size"] == 2 and e["complete"] is True
    assert [r["rank"] for r in e["ranks"]] == [0, 1] and e["joules"] > 0


def test_the_exchange_runs_on_this_ranks_gpu_with_nccl(monkeypatch):
    """NCCL stages object collectives on the current CUDA device: make it this rank's."""
    from greenlab.energy import distributed

    chosen = []

    class Cuda:
        @staticmethod
        def is_available():
            return True

        @staticmethod
        def current_device():
            return 0

        @staticmethod
        def device_count():
            return 4

        @staticmethod
        def device(index):
            chosen.append(index)
            return distributed._collective_device("gloo", None)  # any context manager

    class Torch:
        cuda = Cuda

    monkeypatch.setenv("LOCAL_RANK", "3")
    with distributed._collective_device("nccl", Torch):
        pass
    with distributed._collective_device("gloo", Torch):
        pass
    assert chosen == [3]


def test_three_ranks_one_failing_to_measure_and_one_losing_a_reading_give_an_incomplete_result(tmp_path):
    _wait(_launch(tmp_path, 3, env={"GL_TEST_FAIL": "1:discover,2:end", "GREENLAB_NODE_ID": "n0"}))
    reports = _reports(tmp_path, 3)
    red = reports[0]["reduced"]
    assert red["complete"] is False and red["world_size"] == 3
    text = " | ".join(red["problems"])
    assert ("rank 1 on n0 failed to measure (window start: PermissionError: injected discovery "
            "failure)") in text
    assert red["ranks"][1]["ok"] is False and reports[1]["local"] is None
    lost = [p for p in red["problems"] if p.startswith("rank 2 on n0: cpu:")]
    assert len(lost) == 1 and "end" in lost[0] and "injected read failure" in lost[0]
    # what was measured is still shown, flagged, not passed off as the whole
    assert red["components"]["cpu"]["joules"] == pytest.approx(_local(reports[0], "cpu"))
    assert red["components"]["dram"]["joules"] == pytest.approx(
        max(_local(reports[0], "dram"), _local(reports[2], "dram")))  # rank 2 still read the node
    assert "incomplete: " in reports[0]["reduced_summary"]


def test_two_simulated_nodes_count_each_nodes_shared_devices_once(tmp_path):
    port = _free_port()
    a = _launch(tmp_path, 2, env={"GREENLAB_NODE_ID": "node-a"}, nnodes=2, node_rank=0, port=port)
    b = _launch(tmp_path, 1, env={"GREENLAB_NODE_ID": "node-b"}, nnodes=2, node_rank=1, port=port)
    _wait(a, b)
    reports = _reports(tmp_path, 3)
    red = reports[0]["reduced"]
    assert red["complete"] is True and red["world_size"] == 3
    by_node = {rep["node"]: [] for rep in reports}
    for rep in reports:
        by_node[rep["node"]].append(rep)
    assert sorted(by_node) == ["node-a", "node-b"] and len(by_node["node-a"]) == 2
    for kind, name in (("dram", "dram"), ("gpu", "gpu:0")):  # once per node: its longest window
        per_node = [max(_local(r, name) for r in reps) for reps in by_node.values()]
        assert red["components"][kind]["joules"] == pytest.approx(sum(per_node))
    assert red["components"]["cpu"]["joules"] == pytest.approx(sum(_local(r, "cpu") for r in reports))
    assert len([d for d in red["devices"] if d["kind"] == "gpu"]) == 2
    assert {n: v["ranks"] for n, v in red["nodes"].items()} == {
        "node-a": [r["rank"] for r in by_node["node-a"]], "node-b": [by_node["node-b"][0]["rank"]]}


def test_busy_parts_summed_over_ranks_are_capped_at_the_nodes_maximum_power():
    def rank(r, busy_joules):
        common = {"seconds": 1.0, "source": "estimate", "estimated": True, "rel_uncertainty": 1.0,
                  "note": "", "model": "m", "attribution": "process", "kind": "cpu", "complete": True,
                  "problems": []}
        return {"rank": r, "local_rank": r, "node": "n0", "pid": 100 + r, "ok": True, "error": "",
                "seconds": 1.0, "problems": [],
                "components": {
                    "cpu": dict(common, joules=busy_joules, scope="process", device_id=None, part="busy"),
                    "cpu idle share": dict(common, joules=4.8, scope="node", part="idle share",
                                           device_id="idle share of CPUs 0-1 at 4.8 W",
                                           idle_watts_model=4.8, max_watts_model=24.0)}}

    red = reduce_records([rank(0, 10.0), rank(1, 10.0)])  # 20 J busy in 1 s > (24 - 4.8) W x 1 s
    assert red.components["cpu"].joules == pytest.approx(24.0)
    assert any("capped at the model's maximum power" in w for w in red.warnings)
    fine = reduce_records([rank(0, 5.0), rank(1, 5.0)])
    assert fine.components["cpu"].joules == pytest.approx(14.8)
    assert not any("capped" in w for w in fine.warnings)
