"""greenlab.leaderboard: persistence, ranking, crash safety and recovery."""

import json
from types import SimpleNamespace

import pytest

from greenlab import carbon, profiling
from greenlab.leaderboard import Leaderboard, LeaderboardError


def _board(tmp_path):
    board = Leaderboard(tmp_path / "board.json")
    board.add("slow", joules=300.0, seconds=30.0, accuracy=0.91, target_accuracy=0.9, co2e_g=1.0)
    board.add("lean", joules=120.0, seconds=20.0, accuracy=0.90, target_accuracy=0.9, co2e_g=0.4,
              sources={"cpu": "estimate"}, estimated=True)
    board.add("short", joules=50.0, seconds=5.0, accuracy=0.70, target_accuracy=0.9, co2e_g=0.2)
    return board


def test_entries_persist_across_instances(tmp_path):
    _board(tmp_path)
    again = Leaderboard(tmp_path / "board.json")
    assert [e["name"] for e in again.entries()] == ["slow", "lean", "short"]
    assert [e["id"] for e in again.entries()] == [1, 2, 3]
    assert len(again) == 3
    payload = json.loads((tmp_path / "board.json").read_text())
    assert payload["format"] == "greenlab-leaderboard" and payload["version"] == 1


def test_ranking_best_and_table(tmp_path):
    board = _board(tmp_path)
    ranked = board.ranked()
    assert [(e["rank"], e["name"]) for e in ranked] == [(1, "lean"), (2, "slow"), (3, "short")]
    assert [e["target_reached"] for e in ranked] == [True, True, False]
    assert board.best()["name"] == "lean"
    assert board.best("seconds")["name"] == "lean"
    table = board.table()
    assert table.splitlines()[2].split()[:3] == ["1", "lean", "yes"]
    assert "cpu=estimate (estimate)" in table
    with pytest.raises(ValueError, match="metric"):
        board.ranked("accuracy_per_watt")


def test_best_is_none_until_a_target_is_reached(tmp_path):
    board = Leaderboard(tmp_path / "b.json")
    assert board.best() is None and "no entries" in board.table()
    board.add("miss", joules=1.0, seconds=1.0, accuracy=0.5, target_accuracy=0.9, co2e_g=0.0)
    assert board.best() is None


def test_co2e_is_computed_from_the_carbon_table(tmp_path):
    board = Leaderboard(tmp_path / "b.json")
    entry = board.add("x", joules=3.6e6, seconds=1.0, accuracy=0.5, region="WORLD")
    assert entry["co2e_g"] == pytest.approx(carbon.co2e_g(3.6e6, "WORLD"))
    assert str(carbon.intensity("WORLD").year) in entry["co2e_note"]


def test_add_result_takes_a_run_result(tmp_path):
    run = SimpleNamespace(joules=80.0, seconds=8.0, final_accuracy=0.88, best_accuracy=0.9,
                          joules_to_target=60.0, seconds_to_target=6.0, co2e_g=0.01, region="WORLD",
                          estimated=True, sources={"cpu": "estimate"}, provenance={"device": "cpu"},
                          problems=[], status="target-reached", config={"target_accuracy": 0.9})
    entry = Leaderboard(tmp_path / "b.json").add_result("run", run)
    assert entry["target_reached"] is True and entry["joules_to_target"] == 60.0
    assert entry["provenance"] == {"device": "cpu"} and entry["note"] == "status target-reached"


@pytest.mark.parametrize("kw, match", [
    ({"joules": -1.0}, "joules"),
    ({"joules": float("nan")}, "joules"),
    ({"accuracy": 1.5}, "accuracy"),
    ({"target_accuracy": 0.0}, "target_accuracy"),
    ({"seconds": "3"}, "seconds"),
])
def test_add_rejects_bad_values(tmp_path, kw, match):
    args = {"joules": 1.0, "seconds": 1.0, "accuracy": 0.5, "co2e_g": 0.0, **kw}
    board = Leaderboard(tmp_path / "b.json")
    with pytest.raises(ValueError, match=match):
        board.add("x", **args)
    with pytest.raises(ValueError, match="name"):
        board.add("  ", joules=1.0, seconds=1.0, accuracy=0.5)
    assert not board.path.exists()


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],              # torn write
    lambda text: "",                                 # emptied
    lambda text: '{"format": "something-else"}',     # wrong file
    lambda text: text.replace('"joules": 50.0', '"joules": "lots"'),
])
def test_damaged_file_gives_a_clear_error_and_recovers_from_the_backup(tmp_path, damage):
    board = _board(tmp_path)
    board.path.write_text(damage(board.path.read_text()))
    with pytest.raises(LeaderboardError, match=r"damaged.*2 entries.*recover"):
        board.entries()
    with pytest.raises(LeaderboardError):
        board.add("new", joules=1.0, seconds=1.0, accuracy=0.5, co2e_g=0.0)
    assert board.recover() == 2
    assert [e["name"] for e in board.entries()] == ["slow", "lean"]
    assert len(list(tmp_path.glob("board.json.damaged-*"))) == 1


def test_damaged_without_backup(tmp_path):
    board = Leaderboard(tmp_path / "b.json")
    board.path.write_text("{")
    with pytest.raises(LeaderboardError, match="no usable backup"):
        board.entries()
    with pytest.raises(LeaderboardError, match="no backup"):
        board.recover()


def test_crash_during_add_keeps_the_previous_board(tmp_path, monkeypatch):
    board = _board(tmp_path)
    before = board.path.read_bytes()

    def crash(*args):
        raise OSError("simulated power cut")

    monkeypatch.setattr(profiling.os, "replace", crash)
    with pytest.raises(OSError):
        board.add("lost", joules=1.0, seconds=1.0, accuracy=0.95, target_accuracy=0.9, co2e_g=0.0)
    monkeypatch.undo()
    assert board.path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json", "board.json.bak"]
