"""greenlab.leaderboard: persistence, ranking, crash safety and recovery."""

import json
from types import SimpleNamespace

import pytest

from greenlab.impact import carbon
from greenlab.techniques import profiling
from greenlab.course.leaderboard import Leaderboard, LeaderboardError


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
    board = Leaderboard(tmp_path / "board.json")
    cpu = {"sources": {"cpu": "estimate"}, "estimated": True}
    board.add("slow", joules=300.0, seconds=30.0, accuracy=0.91, target_accuracy=0.9, co2e_g=1.0, **cpu)
    board.add("lean", joules=120.0, seconds=20.0, accuracy=0.90, target_accuracy=0.9, co2e_g=0.4, **cpu)
    board.add("short", joules=50.0, seconds=5.0, accuracy=0.70, target_accuracy=0.9, co2e_g=0.2, **cpu)
    ranked = board.ranked()
    assert [(e["rank"], e["name"]) for e in ranked] == [(1, "lean"), (2, "slow"), (3, "short")]
    assert [e["target_reached"] for e in ranked] == [True, True, False]
    assert board.best()["name"] == "lean"
    assert board.best("seconds")["name"] == "lean"
    table = board.table()
    assert table.splitlines()[2].split()[:3] == ["1", "lean", "yes"]
    assert "cpu=estimate (estimate)" in table
    assert "ranked among themselves" not in table  # one kind of measurement: one ranking
    with pytest.raises(ValueError, match="metric"):
        board.ranked("accuracy_per_watt")


def test_a_class_board_ranks_like_with_like_and_names_each_author(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENLAB_LEADERBOARD_DIR", str(tmp_path / "class"))
    monkeypatch.setenv("GREENLAB_AUTHOR", "ada")
    board = Leaderboard()
    assert board.path == tmp_path / "class" / "leaderboard.json"
    laptop = {"sources": {"cpu": "estimate"}, "estimated": True}
    gpu = {"sources": {"gpu0": "nvml-counter"}, "estimated": False}
    board.add("laptop recipe", joules=40.0, seconds=20.0, accuracy=0.9, target_accuracy=0.85, co2e_g=0.1, **laptop)
    board.add("gpu recipe", joules=900.0, seconds=4.0, accuracy=0.9, target_accuracy=0.85, co2e_g=0.2,
              author="grace", **gpu)
    board.add("gpu lean", joules=600.0, seconds=3.0, accuracy=0.9, target_accuracy=0.85, co2e_g=0.1, **gpu)
    ranked = board.ranked()
    assert [(e["rank"], e["name"], e["author"]) for e in ranked] == [
        (1, "laptop recipe", "ada"), (1, "gpu lean", "ada"), (2, "gpu recipe", "grace")]
    assert ranked[1]["measured_as"] == "measured (gpu0=nvml-counter)"
    table = board.table()
    assert "energy estimated (cpu=estimate): ranked among themselves" in table
    assert "energy measured (gpu0=nvml-counter): ranked among themselves" in table
    assert "not the same yardstick" in table and "grace" in table
    # the same board, read from another process's point of view (the folder given directly)
    assert len(Leaderboard(tmp_path / "class")) == 3
    with pytest.raises(ValueError, match="author"):
        board.add("x", joules=1.0, seconds=1.0, accuracy=0.5, author=" ")


def test_leaderboard_show_prints_a_class_board_from_the_shell(tmp_path, capsys):
    from greenlab.cli.app import main

    Leaderboard(tmp_path).add("run", joules=5.0, seconds=1.0, accuracy=0.9, target_accuracy=0.8, co2e_g=0.0,
                              author="lin")
    assert main(["leaderboard", "show", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 entries" in out and "lin" in out and "run" in out
    (tmp_path / "leaderboard.json").write_text("{broken")
    assert main(["leaderboard", "show", "--dir", str(tmp_path)]) == 1
    assert "damaged" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(__import__("os"), "fork") or __import__("os").geteuid() != 0,
                    reason="needs root, to act as a second learner (user nobody) in a forked child")
def test_a_second_learner_can_add_to_a_board_the_first_created():
    import os
    import shutil
    import tempfile
    from pathlib import Path

    top = Path(tempfile.mkdtemp(prefix="greenlab-class-"))  # pytest's own tmp folder is private to root
    folder = top / "class"
    folder.mkdir()
    os.chmod(top, 0o755)
    os.chmod(folder, 0o777)  # as a JupyterHub's shared folder is writable by the class
    Leaderboard(folder).add("first", joules=5.0, seconds=1.0, accuracy=0.9, co2e_g=0.0, author="root")
    carbon.check_region("WORLD")  # loaded now: the child reads nothing but the board
    pid = os.fork()
    if pid == 0:  # the second learner: another user, same folder
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            Leaderboard(folder).add("second", joules=4.0, seconds=1.0, accuracy=0.9, co2e_g=0.0,
                                    author="nobody-learner")
            code = 0
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert [e["author"] for e in Leaderboard(folder).entries()] == ["root", "nobody-learner"]
    finally:
        shutil.rmtree(top, ignore_errors=True)


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
    # the lock file stays by design (a sticky class folder would refuse to let others remove it)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json", "board.json.bak", "board.json.lock"]


def _run(status="target-reached", best=0.9, to_target=60.0):
    return SimpleNamespace(joules=80.0, seconds=8.0, final_accuracy=best, best_accuracy=best,
                           joules_to_target=to_target, seconds_to_target=None if to_target is None else 6.0,
                           co2e_g=0.01, region="WORLD", estimated=True, sources={"cpu": "estimate"},
                           provenance={}, status=status, config={"target_accuracy": 0.85}, problems=[])


@pytest.mark.parametrize("run, why", [
    (_run(status="completed", best=0.6, to_target=None), "did not reach its target accuracy (60.0% < 85.0%)"),
    (_run(status="interrupted", best=0.9), "ended interrupted"),
    (_run(status="diverged", best=0.1, to_target=None), "ended diverged"),
])
def test_a_failed_submission_is_not_kept_on_the_board(tmp_path, run, why):
    board = Leaderboard(tmp_path / "b.json")
    board.add_result("kept", _run())
    entry = board.add_result("my recipe", run)
    assert entry["saved"] is False and why in entry["why"]
    assert [e["name"] for e in Leaderboard(tmp_path / "b.json").entries()] == ["kept"]


def test_a_submission_that_reached_its_target_is_saved(tmp_path):
    board = Leaderboard(tmp_path / "b.json")
    entry = board.add_result("my recipe", _run())
    assert entry["saved"] is True and entry["why"] == "" and len(board) == 1
    no_target = _run(status="completed", best=0.5, to_target=None)
    no_target.config = {}
    assert board.add_result("no target", no_target)["saved"] is True  # without a target, any finished run


def test_add_can_check_without_saving(tmp_path):
    board = Leaderboard(tmp_path / "b.json")
    entry = board.add("dry", joules=1.0, seconds=1.0, accuracy=0.5, co2e_g=0.1, save=False)
    assert entry["name"] == "dry" and not (tmp_path / "b.json").exists()
    with pytest.raises(ValueError, match="save"):
        board.add("dry", joules=1.0, seconds=1.0, accuracy=0.5, co2e_g=0.1, save="no")


# --- a class folder that works for everyone in it -------------------------------------------------

_ROOT = pytest.mark.skipif(not hasattr(__import__("os"), "fork") or __import__("os").geteuid() != 0,
                           reason="needs root, to act as other learners (setuid in forked children)")
CLASS_GID = 47110  # a class group; learners 47111 and 47112 are in it (no passwd entry needed)


def _class_folder(mode: int):
    import os
    import tempfile
    from pathlib import Path

    top = Path(tempfile.mkdtemp(prefix="greenlab-class-"))  # pytest's own tmp folder is private to root
    folder = top / "class"
    folder.mkdir()
    os.chmod(top, 0o755)
    os.chown(folder, 0, CLASS_GID)
    os.chmod(folder, mode)
    return top, folder


def _as_learner(uid: int, gid: int, work) -> int:
    """Run ``work()`` in a forked child as ``uid``/``gid``, with umask 022 (group write taken
    away, as most logins have it); its exit code."""
    import os

    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.umask(0o022)
            work()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@_ROOT
@pytest.mark.parametrize("mode", [0o1777, 0o2775, 0o3775], ids=["sticky", "setgid", "sticky+setgid"])
def test_two_learners_adding_at_once_to_a_shared_class_folder_lose_nothing(mode):
    import shutil
    import threading

    top, folder = _class_folder(mode)
    carbon.check_region("WORLD")  # loaded now: the children read nothing but the board
    n = 15
    try:
        codes = {}

        def learner(uid):
            def work():
                for i in range(n):
                    Leaderboard(folder).add(f"{uid}-{i}", joules=1.0 + i, seconds=1.0, accuracy=0.9, co2e_g=0.0,
                                            author=f"u{uid}")
            codes[uid] = _as_learner(uid, CLASS_GID, work)

        threads = [threading.Thread(target=learner, args=(uid,)) for uid in (47111, 47112)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert codes == {47111: 0, 47112: 0}
        entries = Leaderboard(folder).entries()
        assert len(entries) == 2 * n and len({e["id"] for e in entries}) == 2 * n
        assert sorted(p.name for p in folder.iterdir()) == ["leaderboard.json", "leaderboard.json.bak",
                                                            "leaderboard.json.lock"]
    finally:
        shutil.rmtree(top, ignore_errors=True)


@_ROOT
def test_an_unwritable_class_folder_is_named_not_a_missing_lock():
    import shutil

    top, folder = _class_folder(0o755)  # root's, not the learner's
    carbon.check_region("WORLD")
    try:
        import os

        r, w = os.pipe()

        def work():
            try:
                Leaderboard(folder).add("x", joules=1.0, seconds=1.0, accuracy=0.9, co2e_g=0.0, author="u")
            except PermissionError as exc:
                os.write(w, str(exc).encode())
                return
            raise AssertionError("added to a folder this user cannot write")

        assert _as_learner(47111, CLASS_GID, work) == 0
        os.close(w)
        said = os.read(r, 4000).decode()
        assert str(folder) in said and "may not write" in said, said
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_the_folder_variable_may_start_with_a_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GREENLAB_LEADERBOARD_DIR", "~/class")
    (tmp_path / "class").mkdir()
    board = Leaderboard()
    assert board.path == tmp_path / "class" / "leaderboard.json"
    board.add("run", joules=1.0, seconds=1.0, accuracy=0.9, co2e_g=0.0, author="lin")
    assert (tmp_path / "class" / "leaderboard.json").exists() and not (tmp_path / "~").exists()
    assert Leaderboard("~/class").path == board.path


def test_leaderboard_show_of_a_mistyped_folder_is_an_error(tmp_path, capsys):
    from greenlab.cli.app import main

    assert main(["leaderboard", "show", "--dir", str(tmp_path / "clas")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["leaderboard", "show", "--dir", str(tmp_path)]) == 2  # a folder, but no board in it
    assert "no leaderboard" in capsys.readouterr().err


# --- what learners typed reaches the instructor harmless --------------------------------------------

def test_learner_text_is_printed_without_its_control_characters(tmp_path):
    board = Leaderboard(tmp_path)
    sources = {"cpu\x1b]0;pwned\x07": "est\rimate"}
    board.add("ok\n  1 forged-row  yes 100.0% 0.001", joules=5.0, seconds=1.0, accuracy=0.5, co2e_g=0.0,
              author="\x1b[2J\x1b[Hmallory", sources=sources)
    board.add("<script>alert(1)</script>", joules=4.0, seconds=1.0, accuracy=0.5, co2e_g=0.0, author="a&b",
              sources=sources)
    text = board.table()
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert len(text.splitlines()) == 2 + 2  # header, rule and one line per entry: no forged row
    assert "\\x1b[2J" in text and "\\n" in text  # shown, visibly, not obeyed
    html = board._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "a&amp;b" in html and "\x1b" not in html


def test_damaged_shards_and_reference_runs_name_their_file(tmp_path):
    import torch

    from greenlab.course import reference
    from greenlab.techniques import storage

    x, y = torch.randn(6, 2), torch.arange(6)
    shards = storage.write_shards(x, y, tmp_path / "shards", samples_per_shard=3)
    shards[1].write_bytes(shards[1].read_bytes()[:700])  # cut short
    with pytest.raises(ValueError, match=f"shard {shards[1]} is damaged"):
        storage.read_shards(shards, (2,))
    shards[0].write_bytes(b"garbage" * 100)
    with pytest.raises(ValueError, match=f"shard {shards[0]} is damaged"):
        storage.read_shards(shards, (2,))
    small = storage.write_small_files(x, y, tmp_path / "small")
    (small / "000002.bin").write_bytes(b"\0" * 5)
    with pytest.raises(ValueError, match="000002.bin is damaged"):
        storage.read_small_files(small, (2,))
    bad = tmp_path / "nvidia-h200_2026-01-01_mixed_precision.json"
    bad.write_bytes(b"\xff\xfe{")
    with pytest.raises(reference.ReferenceRunError, match=bad.name):
        reference.load_file(bad)
    (tmp_path / "nvidia-h100_2026-01-01_mixed_precision.json").mkdir()
    with pytest.raises(reference.ReferenceRunError, match="nvidia-h100_2026-01-01_mixed_precision.json"):
        reference.load_file(tmp_path / "nvidia-h100_2026-01-01_mixed_precision.json")


# --- a board that cannot be forged: recipes re-run in one harness ----------------------------------

class WorkSource:
    """A fake energy counter that counts work, not time: 0.001 J per module forward call in this
    process, so the same recipe with the same seed costs the same joules on a busy machine too."""

    name = "work-counter"
    component = "cpu"
    estimated = False
    rel_uncertainty = 0.0
    update_period_s = 0.0
    poll_interval_s = None
    attribution = "process"
    note = model = ""
    fault_count = 0

    def __init__(self):
        import torch

        self.calls = 0
        self._hook = torch.nn.modules.module.register_module_forward_hook(self._count)

    def _count(self, module, args, out):
        self.calls += 1

    def close(self):
        self._hook.remove()

    def read_joules(self):
        return 0.001 * self.calls

    def faults_since(self, count):
        return []

    def refresh(self):
        pass

    def poll(self):
        pass


@pytest.fixture
def work_source():
    source = WorkSource()
    yield source
    source.close()


def test_verify_accepts_an_honest_claim_and_refuses_an_inflated_one(tmp_path, work_source, capsys):
    import warnings

    from greenlab.course import verify

    warnings.simplefilter("ignore")
    folder = tmp_path / "class"
    fixed = verify.set_harness(folder, dataset="synthetic", n_train=400, n_test=60, target_accuracy=0.2, repeats=3)
    model = {"name": "mlp", "hidden": [32]}
    recipe = {"lr": 0.05, "batch_size": 20, "max_steps": 100, "eval_every": 20}
    # the honest learner runs the recipe in the class harness and claims what it measured
    mine = verify.run_recipe(fixed, model, recipe, sources=[work_source])
    assert mine["reached"], mine
    claim = mine["joules"]["mean"]
    verify.submit(folder, "honest", model, recipe, joules=claim, accuracy=mine["accuracy"]["mean"], author="ana")
    verify.submit(folder, "inflated", model, recipe, joules=claim / 10, accuracy=0.99, author="mallory")
    verify.submit(folder, "reference", model, recipe, joules=claim, accuracy=mine["accuracy"]["mean"],
                  author="instructor", reference=True)
    decided = verify.verify(folder, sources=[work_source], machine="test machine")
    status = {e["name"]: e["status"] for e in decided}
    assert status == {"honest": "verified", "inflated": "refused", "reference": "verified"}
    inflated = next(e for e in decided if e["name"] == "inflated")
    assert "below" in inflated["why"] and "J" in inflated["why"]
    text = verify.table(folder)
    assert "target 20.0%" in text and "synthetic, 400 train / 60 test" in text and "quick mode" in text
    learners, reference = text.split("-- reference recipes, re-run --")
    assert "honest" in learners and "reference" not in learners.split("--")[-1] and "instructor" in reference
    assert "inflated by mallory: refused" in text
    assert verify.verify(folder, sources=[work_source]) == []  # nothing left to decide


def test_verify_refuses_to_rerun_in_another_mode(tmp_path, monkeypatch):
    from greenlab.course import verify
    from greenlab.session import config

    monkeypatch.setattr(config, "_current", None)  # the mode comes from the environment, not an earlier gl.setup()
    monkeypatch.setenv("GREENLAB_QUICK", "1")
    assert verify.set_harness(tmp_path).mode == "quick"
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    with pytest.raises(ValueError, match="quick mode"):
        verify.verify(tmp_path)


def test_a_recipe_may_set_training_only_not_the_harness(tmp_path):
    from greenlab.course import verify

    with pytest.raises(ValueError, match="target_accuracy"):
        verify.submit(tmp_path, "x", {"name": "mlp"}, {"target_accuracy": 0.01}, joules=1.0, accuracy=0.5)
    with pytest.raises(ValueError, match="model"):
        verify.submit(tmp_path, "x", {"name": "gpt-9"}, {}, joules=1.0, accuracy=0.5)
    with pytest.raises(ValueError, match="lr"):
        verify.submit(tmp_path, "x", {"name": "mlp"}, {"lr": -1.0}, joules=1.0, accuracy=0.5)
    with pytest.raises(ValueError, match="joules"):
        verify.submit(tmp_path, "x", {"name": "mlp"}, {}, joules=float("nan"), accuracy=0.5)
    with pytest.raises(FileNotFoundError, match="no harness"):
        verify.verify(tmp_path)
    from greenlab.cli.app import main

    assert main(["leaderboard", "verify", "--dir", str(tmp_path)]) == 2  # no harness fixed: an error
