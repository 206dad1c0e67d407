"""The CPU estimate: whose CPU time it counts, how big the machine is, and no psutil needed."""

import subprocess
import sys
import time

import pytest

from greenlab.energy import cpus
from greenlab.energy.estimate import CpuEstimateSource
from greenlab.energy.sources import discover


def write_stat(proc, pid, ppid, utime, stime, cutime=0, cstime=0, comm="py thon) x"):
    d = proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    fields = ["S", ppid] + [0] * 9 + [utime, stime, cutime, cstime] + [0] * 20
    (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(map(str, fields)) + "\n")


def test_process_tree_counts_self_reaped_and_live_descendants_only(tmp_path):
    proc = tmp_path / "proc"
    write_stat(proc, 100, 1, 50, 10, cutime=7, cstime=3)  # us: 60 own + 10 reaped children
    write_stat(proc, 101, 100, 20, 5)  # a live worker
    write_stat(proc, 102, 101, 4, 1, cutime=2)  # its child (grandchild of ours)
    write_stat(proc, 200, 1, 999, 999)  # a busy neighbour: not ours
    write_stat(proc, 201, 200, 999, 999)  # and its child
    tree = cpus.ProcessTreeCpu(pid=100, proc_root=proc)
    assert tree.how == "/proc"
    tick = cpus.clock_ticks_per_second()
    assert tree.seconds() == pytest.approx((60 + 10 + 25 + 7) / tick)


def test_exited_child_moves_into_cutime_without_a_jump(tmp_path):
    proc = tmp_path / "proc"
    write_stat(proc, 100, 1, 50, 0)
    write_stat(proc, 101, 100, 30, 0)
    clock = {"t": 0.0}
    tree = cpus.ProcessTreeCpu(pid=100, proc_root=proc, clock=lambda: clock["t"])
    before = tree.seconds()
    (proc / "101" / "stat").unlink()  # the worker exits and is reaped ...
    write_stat(proc, 100, 1, 50, 0, cutime=30)  # ... its time now in our cutime
    assert tree.seconds() == before


def test_a_real_child_process_is_counted_while_it_runs():
    tree = cpus.ProcessTreeCpu()
    start = tree.seconds()
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.4: pass\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 30
        while tree.seconds() - start < 0.35 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tree.seconds() - start >= 0.35  # counted while the child is still alive
    finally:
        child.kill()
        child.wait()


def test_cgroup_v2_quota_and_affinity_size_the_machine(tmp_path):
    proc, cg = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text("0::/job/step\n")
    (cg / "job" / "step").mkdir(parents=True)
    (cg / "cpu.max").write_text("max 100000\n")
    (cg / "job" / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs for the whole job
    (cg / "job" / "step" / "cpu.max").write_text("max 100000\n")
    assert cpus.cgroup_cpu_quota(proc, cg) == 1.5
    alloc = cpus.allocated_cpus(proc, cg, affinity=1)
    assert alloc.cpus == 1 and "affinity allows 1" in alloc.how


def test_cgroup_v1_quota(tmp_path):
    proc, cg = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text("4:cpu,cpuacct:/docker/abc\n0::/\n")
    d = cg / "cpu,cpuacct" / "docker" / "abc"
    d.mkdir(parents=True)
    (d / "cpu.cfs_quota_us").write_text("200000\n")
    (d / "cpu.cfs_period_us").write_text("100000\n")
    assert cpus.cgroup_cpu_quota(proc, cg) == 2.0
    (d / "cpu.cfs_quota_us").write_text("-1\n")  # unlimited
    assert cpus.cgroup_cpu_quota(proc, cg) is None


def test_estimate_is_sized_by_the_allocation_not_the_host(monkeypatch):
    monkeypatch.setattr(cpus, "allocated_cpus", lambda: cpus.CpuAllocation(
        2.0, host_logical=64, host_physical=32, how="host has 64 logical CPUs, cgroup quota allows 2"))
    source = CpuEstimateSource(busy_seconds=lambda: 0.0, tdp_per_core_w=12.0)
    assert source.n_logical == 2.0 and source.n_physical == 1.0  # 2 threads of one core
    assert source.max_watts == 12.0
    assert "cgroup quota allows 2" in source.model and "cgroup quota" in source.describe()["sizing"]


def test_machine_busy_from_proc_stat(tmp_path):
    (tmp_path / "stat").write_text("cpu  100 5 20 900 30 1 2 3 0 0\ncpu0 1 2 3 4\n")
    tick = cpus.clock_ticks_per_second()
    assert cpus.machine_busy_seconds(tmp_path) == pytest.approx((100 + 5 + 20 + 1 + 2) / tick)


def test_process_attribution_ignores_a_busy_neighbour():
    """Same own work, a neighbour that keeps the machine busy: process mode does not move,
    machine mode reads it (fake counters, exact)."""
    state = {"t": 0.0, "own": 0.0, "machine": 0.0}
    process = CpuEstimateSource(n_logical=2, n_physical=2, clock=lambda: state["t"],
                                busy_seconds=lambda: state["own"], attribution="process")
    machine = CpuEstimateSource(n_logical=2, n_physical=2, clock=lambda: state["t"],
                                busy_seconds=lambda: state["machine"], attribution="machine")
    alone = []
    for neighbour in (0.0, 1.0):  # CPU-seconds per second used by someone else
        p0, m0 = process.read_joules(), machine.read_joules()
        state["t"] += 10.0
        state["own"] += 10.0  # one of the two CPUs busy with our work
        state["machine"] += 10.0 + 10.0 * neighbour
        alone.append((process.read_joules() - p0, machine.read_joules() - m0))
    (p_alone, m_alone), (p_busy, m_busy) = alone
    assert p_busy == p_alone
    assert m_busy / m_alone == pytest.approx(24.0 / 14.4)  # P_max vs P_idle + half the range


def test_attribution_is_in_every_label_and_checked():
    source = CpuEstimateSource(n_logical=2, n_physical=2, busy_seconds=lambda: 0.0)
    assert source.attribution == "process" and source.model.startswith("estimate (process)")
    assert source.rel_uncertainty == 1.0 and "factor of 2" in source.model
    machine = CpuEstimateSource(n_logical=2, n_physical=2, busy_seconds=lambda: 0.0,
                                attribution="machine")
    assert "all processes on the machine" in machine.model
    with pytest.raises(ValueError, match="attribution"):
        CpuEstimateSource(attribution="everyone")
    with pytest.raises(ValueError, match="attribution"):
        discover(attribution="node")


def test_energy_package_works_without_psutil(tmp_path):
    code = (
        "import sys; sys.modules['psutil'] = None\n"
        "import time\n"
        "from greenlab.energy import measure, discover\n"
        "from greenlab.energy.estimate import CpuEstimateSource\n"
        f"found = discover(rapl_root={str(tmp_path / 'none')!r})\n"
        "cpu = [s for s in found.sources if s.component == 'cpu'][0]\n"
        "assert cpu.busy_how == '/proc', cpu.busy_how\n"
        "CpuEstimateSource(attribution='machine').read_joules()\n"
        "with measure('w', sources=found.sources, sync=False) as m:\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 0.2: pass\n"
        "assert m.result.joules > 0 and m.result.complete, m.result.summary()\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_heavier_own_work_reads_more_in_process_mode():
    source = CpuEstimateSource()

    def spin(seconds):
        t = time.process_time()
        while time.process_time() - t < seconds:
            pass

    # powers over the wall time each phase really took (a busy machine stretches both)
    t0, j0 = time.perf_counter(), source.read_joules()
    time.sleep(0.3)  # idle: only P_idle
    t1, j1 = time.perf_counter(), source.read_joules()
    spin(0.3)
    t2, j2 = time.perf_counter(), source.read_joules()
    idle_w = (j1 - j0) / (t1 - t0)
    busy_w = (j2 - j1) / (t2 - t1)
    assert idle_w == pytest.approx(source.idle_watts, rel=0.3)
    assert busy_w > idle_w  # own work raises the power: it is counted


def test_greenlab_measure_counts_the_commands_cpu_time(capsys, monkeypatch, tmp_path):
    """The command is a child: its CPU time is in the default (process) estimate."""
    import argparse
    import json

    import importlib

    from greenlab.cli import measure as command

    measure_mod = importlib.import_module("greenlab.energy.windows")  # where measure() opens a window
    measure_fn = measure_mod.measure
    monkeypatch.setattr(measure_mod, "measure", lambda label, **kw: measure_fn(
        label, sources=[CpuEstimateSource(n_logical=2, n_physical=2)], sync=False))
    busy = [sys.executable, "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"]
    ns = argparse.Namespace(cmd=["--", *busy], json=True, region="WORLD", pue=None)
    assert command.measure_main(ns) == 0
    report = json.loads(capsys.readouterr().out)
    cpu = report["components"]["cpu"]
    assert cpu["attribution"] == "process"
    # at least P_idle over the run plus half the dynamic range for 0.5 CPU-seconds on 2 CPUs
    assert cpu["joules"] >= 4.8 * report["seconds"] + 19.2 * 0.45 / 2
    ns.json = False
    assert command.measure_main(ns) == 0
    assert "cpu: greenlab and the command's processes only" in capsys.readouterr().err


@pytest.mark.parametrize("name, watts, row", [
    ("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", 7.5, "Xeon Gold 6148"),
    ("Intel(R) Core(TM) i5-10400F CPU @ 2.90GHz", 10.8, "Core i5-10400F"),
    ("AMD Ryzen 5 3500U with Radeon Vega Mobile Gfx", 3.8, "Ryzen 5 3500U"),
    ("AMD EPYC 7552 48-Core Processor", 4.2, "EPYC 7552"),
])
def test_per_core_tdp_is_looked_up_in_the_cited_table(name, watts, row):
    from greenlab.energy.estimate import lookup_tdp_per_core

    got, source = lookup_tdp_per_core(name)
    assert got == watts and source.startswith(row) and "Green Algorithms" in source


def test_unlisted_cpu_uses_the_tables_default_and_says_so():
    from greenlab.energy.estimate import TDP_PER_CORE_W, lookup_tdp_per_core

    got, source = lookup_tdp_per_core("Intel(R) Core(TM) i5-104000 CPU")  # no such row
    assert got == TDP_PER_CORE_W == 12.0 and "has no row for" in source
    source = CpuEstimateSource(busy_seconds=lambda: 0.0, n_logical=2, n_physical=2)
    assert f"{source.tdp_per_core_w:g} W/core" in source.model and "Green Algorithms" in source.model


@pytest.mark.parametrize("content, why", [
    (None, "data table not found"),
    ("model,tdp_w,cores,tdp_per_core_w,source,year\nEPYC 7552,200,48,,amd,2021\n", "empty 'tdp_per_core_w'"),
    ("model,tdp_w,cores,tdp_per_core_w,source,year\nEPYC 7552,200,48,-4.2,amd,2021\n", "tdp_per_core_w must be"),
    ("model,cores\nEPYC 7552,48\n", "missing column"),
])
def test_an_unreadable_tdp_table_falls_back_to_the_default_and_says_why(tmp_path, monkeypatch, content, why):
    from greenlab.energy import estimate

    if content is not None:
        (tmp_path / "cpu_tdp.csv").write_text(content, encoding="utf-8")
    monkeypatch.setenv("GREENLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(estimate, "_TABLE", None)
    got, source = estimate.lookup_tdp_per_core("AMD EPYC 7552 48-Core Processor")
    assert got == estimate.TDP_PER_CORE_W and "could not be read" in source and why in source
