"""Tests for greenlab.results: crash-safe JSONL appends and tolerant loading."""

import json
import math

import pytest

from greenlab.base import results


def test_append_and_load_round_trip(tmp_path):
    path = tmp_path / "log" / "runs.jsonl"
    results.append({"a": 1, "t": (1, 2), "x": math.nan}, path=path)
    results.append({"a": 2}, path=path)
    rows = results.load(path)
    assert rows == [{"a": 1, "t": [1, 2], "x": None}, {"a": 2}]
    assert path.read_text().count("\n") == 2


def test_default_path_follows_results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path))
    assert results.log_path() == tmp_path / "runs.jsonl"
    results.append({"k": "v"})
    assert results.load() == [{"k": "v"}]
    assert results.load(tmp_path / "missing.jsonl") == []


def test_torn_last_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / "runs.jsonl"
    results.append({"n": 1}, path=path)
    with open(path, "a") as f:
        f.write('{"n": 2, "half')  # a crash mid-write
    with pytest.warns(RuntimeWarning, match="skipped 1 damaged line"):
        assert results.load(path) == [{"n": 1}]
    results.append({"n": 3}, path=path)  # starts on a fresh line
    with pytest.warns(RuntimeWarning, match="skipped 1"):
        assert results.load(path) == [{"n": 1}, {"n": 3}]


def test_bad_record_writes_nothing(tmp_path):
    path = tmp_path / "runs.jsonl"
    results.append({"ok": True}, path=path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="JSON"):
        results.append({"ok": True, "bad": object()}, path=path)
    with pytest.raises(ValueError, match="dict"):
        results.append([1, 2], path=path)
    assert path.read_bytes() == before
    assert json.loads(before) == {"ok": True}


def test_objects_with_to_dict_are_stored(tmp_path):
    class Thing:
        def to_dict(self):
            return {"inner": 1.5}

    results.append({"thing": Thing()}, path=tmp_path / "r.jsonl")
    assert results.load(tmp_path / "r.jsonl") == [{"thing": {"inner": 1.5}}]
