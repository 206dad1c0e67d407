"""Lessons 04-07 each record one headline (greenlab.course.headline) from a paired verdict computed in
the same cell, so the results table's factor is the lesson's own measurement, never a typed figure."""

import ast
from pathlib import Path

import nbformat
import pytest

INSTRUCTOR = Path(__file__).resolve().parent.parent / "lessons" / "instructor"

HEADLINED = ("04", "05", "06", "07")


def _instructor_copy(number):
    (path,) = sorted(INSTRUCTOR.glob(f"{number}_*.ipynb"))
    return nbformat.read(path, as_version=4)


def _headline_calls(tree):
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "headline"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "gl"]


def _assigned_from_paired(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
            return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "paired")
    return False


@pytest.mark.parametrize("number", HEADLINED)
def test_one_headline_cell_whose_factor_is_a_paired_verdict_of_that_cell(number):
    nb = _instructor_copy(number)
    cells = [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and _headline_calls(ast.parse(cell.source))]
    assert len(cells) == 1, f"lesson {number}: {len(cells)} cells call gl.headline"
    index, cell = cells[0]
    tree = ast.parse(cell.source)
    (call,) = _headline_calls(tree)
    lesson = call.args[0]
    assert isinstance(lesson, ast.Constant) and lesson.value is None, "the results runner names the lesson"
    factor = call.args[3]
    assert isinstance(factor, ast.Name) and _assigned_from_paired(tree, factor.id), \
        f"lesson {number}: the factor is not a paired verdict computed in the headline cell"
    assert any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "print"
               and any(isinstance(c, ast.Attribute) and c.attr == "sentence"
                       for a in n.args for c in ast.walk(a))
               for n in ast.walk(tree)), f"lesson {number}: the outcome sentence is not printed from the verdict"
    following = nb.cells[index + 1]
    assert following.cell_type == "markdown" and "headline" in following.source
