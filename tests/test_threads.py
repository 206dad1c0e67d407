"""Tests for greenlab.threads: the thread-count decision (fake cores and load), and setup()."""

import pytest
import torch

from greenlab.session import config, threads


def test_small_machines_get_one_thread_whatever_the_load_and_the_wait_policy():
    for cores, busy in ((1, 0.0), (2, 0.0), (2, 1.0), (2, None), (2.5, 0.0)):
        for environ in ({}, {"OMP_WAIT_POLICY": "PASSIVE"}):
            choice = threads.choose(environ, cores, busy)
            assert choice.threads == 1, (cores, busy, environ)
            assert "one thread costs the least energy here" in choice.reason


def test_larger_machines_leave_the_busy_cores_to_other_programs():
    assert threads.choose({}, 8, 0.0).threads == 8
    assert threads.choose({}, 8, 0.4).threads == 8  # under half a core in use: not taken
    assert threads.choose({}, 8, 0.6).threads == 7  # over half: taken
    assert threads.choose({}, 8, 2.5).threads == 5
    assert threads.choose({}, 4, 1.0).threads == 3
    assert threads.choose({}, 4, 30.0).threads == 1  # never fewer than one
    assert threads.choose({}, 6.7, 0.0).threads == 6  # a fractional quota rounds down
    choice = threads.choose({}, 8, 2.5)
    assert "8 cores, 2.5 kept busy by other programs" in choice.reason


def test_unknown_load_keeps_one_core_free():
    assert threads.choose({}, 8, None).threads == 7
    assert threads.choose({}, 8, float("nan")).threads == 7
    assert "unknown" in threads.choose({}, 8, None).reason


def test_the_environment_and_the_argument_win_over_the_machine():
    assert threads.choose({"GREENLAB_THREADS": "3"}, 2, 1.0) == threads.ThreadChoice(3, "GREENLAB_THREADS=3")
    assert threads.choose({"GREENLAB_THREADS": " 4 "}, 16, 0.0).threads == 4
    assert threads.choose({"GREENLAB_THREADS": "auto"}, 8, 0.0).threads == 8
    assert threads.choose({"GREENLAB_THREADS": ""}, 2, 0.0).threads == 1
    assert threads.choose({"GREENLAB_THREADS": "3"}, 8, 0.0, requested=2).threads == 2
    for bad in ("0", "two", "-1", "1.5", "2000"):
        with pytest.raises(ValueError, match="GREENLAB_THREADS must be a whole number"):
            threads.choose({"GREENLAB_THREADS": bad}, 8, 0.0)
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="threads must be a whole number"):
            threads.choose({}, 8, 0.0, requested=bad)
    for bad in (0, -2, None, "8", True):
        with pytest.raises(ValueError, match="cores must be a positive number"):
            threads.choose({}, bad, 0.0)


def test_busy_cores_subtracts_this_process_and_falls_back_to_the_load_average(monkeypatch):
    from greenlab.energy import cpus

    clock = iter([100.0, 100.9])  # machine busy seconds before and after
    monkeypatch.setattr(cpus, "machine_busy_seconds", lambda: next(clock))
    cpu = iter([5.0, 5.1])  # this process used 0.1 s of it
    monkeypatch.setattr(threads.time, "process_time", lambda: next(cpu))
    wall = iter([0.0, 0.5])
    monkeypatch.setattr(threads.time, "perf_counter", lambda: next(wall))
    monkeypatch.setattr(threads.time, "sleep", lambda s: None)
    assert threads.busy_cores() == pytest.approx(1.6)  # (0.9 - 0.1) / 0.5

    def unreadable():
        raise OSError("no /proc/stat")

    monkeypatch.setattr(cpus, "machine_busy_seconds", unreadable)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (3.5, 1.0, 1.0))
    assert threads.busy_cores() == 3.5
    monkeypatch.delattr(threads.os, "getloadavg")
    assert threads.busy_cores() is None


@pytest.fixture
def keep_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(config, "_current", None)
    monkeypatch.delenv("GREENLAB_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    yield
    torch.set_num_threads(before)


def test_setup_applies_the_choice_and_prints_why(monkeypatch, capsys, keep_threads):
    monkeypatch.setattr(threads, "usable_cores", lambda: 8.0)
    monkeypatch.setattr(threads, "busy_cores", lambda: 1.0)
    s = config.setup()
    assert s.threads == 7 == torch.get_num_threads()
    assert "CPU threads 7 (8 cores, 1.0 kept busy by other programs" in capsys.readouterr().out
    monkeypatch.setattr(threads, "usable_cores", lambda: 2.0)

    def not_watched():
        raise AssertionError("a 2-core machine needs no look at its load")

    monkeypatch.setattr(threads, "busy_cores", not_watched)
    assert config.setup(verbose=False).threads == 1 == torch.get_num_threads()
    monkeypatch.setenv("GREENLAB_THREADS", "2")
    s = config.setup(verbose=False)
    assert s.threads == 2 and s.threads_reason == "GREENLAB_THREADS=2"
    assert config.setup(threads=1, verbose=False).threads_reason == "set by setup(threads=...)"


def test_passive_waiting_uses_every_core_without_watching_the_load(monkeypatch, keep_threads):
    passive = {"OMP_WAIT_POLICY": "passive"}
    assert threads.passive_waiting(passive) and not threads.passive_waiting({"OMP_WAIT_POLICY": "ACTIVE"})
    assert not threads.passive_waiting({})
    for cores, busy in ((3, 2.0), (8, 3.0), (8, None)):
        choice = threads.choose(passive, cores, busy)
        assert choice.threads == int(cores) and "OMP_WAIT_POLICY=PASSIVE" in choice.reason
    for cores, busy in ((2, 1.0), (2, None), (1, 0.0)):  # 1 thread: the least energy on 2 cores either way
        for environ in (passive, {}):
            assert threads.choose(environ, cores, busy).threads == 1
    assert threads.choose({**passive, "GREENLAB_THREADS": "1"}, 8, 0.0).threads == 1
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setattr(threads, "usable_cores", lambda: 4.0)

    def not_watched():
        raise AssertionError("passive waiting needs no look at the load")

    monkeypatch.setattr(threads, "busy_cores", not_watched)
    assert config.setup(verbose=False).threads == 4 == torch.get_num_threads()
