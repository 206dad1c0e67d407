"""Which code cells of a notebook a grade needs: the required cells and what they read, found back
through the notebook in order.

Grading mode (``greenlab.course.nbgrader_preprocessor.SkipExperiments``) runs only these. A cell is
*required* when the caller says so (the set-up cell, the learner's answers, the graded tests, the
cell that shows a hand-graded answer); any other cell runs only when it may bind or change a name
that a later cell which runs reads before binding it itself. Walking back from the last cell, the
names still to be found ("live") start empty; a cell that runs removes the names it surely binds
(a top-level assignment, ``def``, ``class``, ``import``, ``with ... as`` or an assignment in a
top-level ``with`` block) and adds the names it
reads first. So a figure cell that makes its own ``fig`` and ``ax`` is not kept because a later
cell also draws a ``fig``, and of three cells that assign ``data`` only the last one before its
reader runs.

What counts, from the cell's source read with :mod:`ast` (a cell with IPython syntax, such as a
``%%`` magic, is read as IPython would run it, and a cell magic's body as Python):

* *reads*: the names a cell loads before binding them, including the free names of the functions
  and lambdas it defines (a function may be called later) and the names of default arguments;
* *may change*: every name it assigns anywhere (inside a loop, an ``if``, a ``try``), the name
  under a subscript or attribute it assigns (``runs["fp32"] = ...``), an augmented assignment, and
  the name whose method a statement calls for its effect (``history.append(run)``; names bound by
  an ``import`` anywhere in the notebook are modules, left out);
* a cell IPython syntax hides names in (a cell magic may bind names of its own) runs when a name
  still live is bound by no earlier cell that can be read.

A notebook whose names are used in ways no reading sees (``globals()[name]``, ``exec``) is not
handled: every lesson's graded run checks that each cell it ran ran without an error.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Iterable, Sequence

# names every kernel has without a cell binding them
ALWAYS_BOUND = frozenset(dir(builtins)) | {"display", "get_ipython", "In", "Out", "exit", "quit", "_", "__", "___"}


@dataclass(frozen=True)
class CellNames:
    """What one cell does with names: ``reads`` before binding, ``binds`` surely (at its top
    level), ``changes`` (possibly, anywhere; includes ``binds``), and ``opaque`` when IPython syntax
    may bind names that the reading cannot see."""

    reads: frozenset
    binds: frozenset
    changes: frozenset
    opaque: bool = False


def needed(sources: Sequence[str], required: Iterable[int]) -> set[int]:
    """The indices of the cells in ``sources`` (code cells, in notebook order) that must run so
    that every cell in ``required`` has the names it reads (see the module docstring)."""
    required = set(required)
    modules = set()
    for source in sources:
        modules |= _imported(source)
    cells = [names(source, modules) for source in sources]
    readable_before, seen = [], set()
    for cell in cells:
        readable_before.append(frozenset(seen))
        if not cell.opaque:
            seen |= cell.changes
    keep: set[int] = set()
    live: set[str] = set()
    for i in reversed(range(len(cells))):
        cell = cells[i]
        unresolved = cell.opaque and bool(live - readable_before[i] - ALWAYS_BOUND)
        if i in required or cell.changes & live or unresolved:
            keep.add(i)
            live = (live - cell.binds) | cell.reads
    return keep


def names(source: str, modules: Iterable[str] = ()) -> CellNames:
    """What the cell ``source`` reads, binds and may change; ``modules``: names bound by an import
    (their method calls are not counted as changes)."""
    tree, opaque = _parse(source)
    if tree is None:  # not Python even for IPython: it runs or fails alone, binding nothing we can see
        return CellNames(frozenset(), frozenset(), frozenset(), opaque=True)
    reads, bound = _block_reads(tree.body), _block_binds(tree.body)
    for body in _cell_magic_bodies(tree):
        inner = names(body, modules)
        reads |= inner.reads - bound
        opaque = True
    changes = set(bound) | _changes(tree, set(modules))
    return CellNames(frozenset(reads), frozenset(bound), frozenset(changes), opaque)


# --- helpers --------------------------------------------------------------------------------------


def _parse(source: str):
    """(tree, opaque): the cell as Python, else as IPython runs it (opaque: it has IPython syntax)."""
    try:
        return ast.parse(source), False
    except SyntaxError:
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager  # lazy: only a cell with IPython syntax needs it
    except ImportError:
        return None, True
    try:
        return ast.parse(TransformerManager().transform_cell(source)), True
    except SyntaxError:
        return None, True


def _cell_magic_bodies(tree) -> list[str]:
    """The body of every ``%%magic`` in the cell (``get_ipython().run_cell_magic(name, line, body)``)."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "run_cell_magic" and len(node.args) == 3
                and isinstance(node.args[2], ast.Constant) and isinstance(node.args[2].value, str)):
            found.append(node.args[2].value)
    return found


def _imported(source: str) -> set[str]:
    tree, _ = _parse(source)
    if tree is None:
        return set()
    return {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}


def _binds(statement) -> set[str]:
    """The names a top-level statement surely binds."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"}
    if isinstance(statement, ast.Assign):
        return {n for target in statement.targets for n in _target_names(target)}
    if isinstance(statement, ast.AnnAssign) and statement.value is not None:
        return _target_names(statement.target)
    if isinstance(statement, (ast.With, ast.AsyncWith)):  # its body runs, unless it raises
        return {n for item in statement.items if item.optional_vars is not None
                for n in _target_names(item.optional_vars)} | _block_binds(statement.body)
    return set()


def _target_names(target) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for element in target.elts for n in _target_names(element)}
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()


def _block_binds(statements) -> set[str]:
    return _union(_binds(s) for s in statements)


def _block_reads(statements) -> set[str]:
    """The names a list of statements reads before one of them surely binds them; a function the
    statements define reads its body's names when called, after all of them (a recursive
    function reads its own name, bound by its ``def``)."""
    reads, bound, later = set(), set(), set()
    for statement in statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            later |= _reads(statement)
        else:
            reads |= _reads(statement) - bound
        bound |= _binds(statement)
    return reads | (later - bound)


def _reads(node) -> set[str]:
    """The names ``node`` loads that it does not bind first (free names of functions, lambdas and
    comprehensions; decorators and defaults are read where they are defined)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        outside = [*args.defaults, *(d for d in args.kw_defaults if d is not None),
                   *getattr(node, "decorator_list", [])]
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        body = node.body if isinstance(node.body, list) else [node.body]
        local = params | {n for child in body for n in _stored(child)}
        inner = _block_reads(body)
        return _union(_reads(d) for d in outside) | (inner - local)
    if isinstance(node, ast.ClassDef):
        parts = [*node.bases, *(k.value for k in node.keywords), *node.decorator_list, *node.body]
        return _union(_reads(p) for p in parts)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        targets = {n for g in node.generators for n in _target_names(g.target)}
        parts = [*(g.iter for g in node.generators), *(i for g in node.generators for i in g.ifs)]
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return _union(_reads(p) for p in parts) - targets
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return _reads(node.iter) | (_block_reads(node.body) - _target_names(node.target)) | _block_reads(node.orelse)
    if isinstance(node, (ast.While, ast.If)):
        return _reads(node.test) | _block_reads(node.body) | _block_reads(node.orelse)
    if isinstance(node, (ast.With, ast.AsyncWith)):
        named = {n for item in node.items if item.optional_vars is not None for n in _target_names(item.optional_vars)}
        return _union(_reads(item.context_expr) for item in node.items) | (_block_reads(node.body) - named)
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        handlers = _union((_reads(h.type) if h.type is not None else set()) | (_block_reads(h.body) - {h.name})
                          for h in node.handlers)
        return _block_reads(node.body) | handlers | _block_reads(node.orelse) | _block_reads(node.finalbody)
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) else set()
    if isinstance(node, ast.AugAssign):  # x += 1 reads x
        return _target_names(node.target) | _reads(node.value) | _union(_reads(c) for c in ast.iter_child_nodes(node.target))
    return _union(_reads(child) for child in ast.iter_child_nodes(node))


def _stored(node) -> set[str]:
    """Every name ``node`` assigns, at any depth (a function's locals)."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            found.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return found


def _changes(tree, modules: set[str]) -> set[str]:
    """Every name the cell may bind or change (see the module docstring), outside function bodies
    except for names they declare ``global``."""
    found: set[str] = set()

    def visit(node, in_function: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not in_function and not isinstance(node, ast.Lambda):
                found.add(node.name)
            body = node.body if isinstance(node.body, list) else [node.body]
            for child in body:
                visit(child, True)
            return
        if isinstance(node, ast.ClassDef) and not in_function:
            found.add(node.name)
        if isinstance(node, ast.Global):
            found.update(node.names)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return  # its variables are its own
        if not in_function:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.update(_root(node))
            elif isinstance(node, ast.AugAssign):
                found.update(_root(node.target))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                    and isinstance(node.value.func, ast.Attribute):
                found.update(_root(node.value.func.value) - modules)
        for child in ast.iter_child_nodes(node):
            visit(child, in_function)

    for statement in tree.body:
        visit(statement, False)
    return found


def _root(node) -> set[str]:
    """The name at the root of ``a.b[c].d`` (``a``), if it is one."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return {node.id} if isinstance(node, ast.Name) else set()


def _union(sets) -> set:
    out: set = set()
    for s in sets:
        out |= s
    return out
