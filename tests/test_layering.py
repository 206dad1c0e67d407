"""The package stacks one way: no import cycle, and no module imports a layer above its own.

Every ``import`` of every module counts, at module level and inside functions (a deferred import
still ties two modules together), read with ``ast``; importing ``greenlab.a.b`` from outside
``greenlab.a`` also runs ``greenlab/a/__init__.py``, so it counts as importing ``greenlab.a``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "greenlab"

# Bottom first. A module belongs to the longest entry that is it or a package above it (the face,
# ``greenlab``, is only greenlab/__init__.py); it may import modules of its own layer and of the
# layers below, never one above.
LAYERS = [
    ("base", ["greenlab.base", "greenlab.version", "greenlab.validation", "greenlab.units",
              "greenlab.tables", "greenlab.paths", "greenlab.storage", "greenlab.filelock",
              "greenlab.results", "greenlab.optional", "greenlab.processes", "greenlab.progress",
              "greenlab.interrupts", "greenlab.torch_install"]),
    ("energy", ["greenlab.energy"]),
    ("impact", ["greenlab.impact", "greenlab.carbon", "greenlab.scheduling", "greenlab.scaling",
                "greenlab.report", "greenlab.network", "greenlab.impact.idle"]),
    ("hardware", ["greenlab.session.hardware", "greenlab.session.devices", "greenlab.hardware",
                  "greenlab.devices"]),
    ("session", ["greenlab.session", "greenlab.threads", "greenlab.config"]),
    ("training", ["greenlab.training", "greenlab.train", "greenlab.checkpoint", "greenlab.data",
                  "greenlab.datacache", "greenlab.catalogue", "greenlab.models", "greenlab.optimizers",
                  "greenlab.memory", "greenlab.precision", "greenlab.accuracy", "greenlab.train_step"]),
    ("experiments", ["greenlab.experiments"]),
    ("techniques", ["greenlab.techniques", "greenlab.batching", "greenlab.compress", "greenlab.search",
                    "greenlab.profiling", "greenlab.ddp", "greenlab.lm", "greenlab.lm_compile",
                    "greenlab.lm_serve", "greenlab.lora", "greenlab.sharding", "greenlab.sharding_run",
                    "greenlab.roofline", "greenlab.numerics", "greenlab.accumulation", "greenlab.active",
                    "greenlab.prefetch", "greenlab.stopping", "greenlab.federated",
                    "greenlab.edge", "greenlab.techniques.preemption",
                    "greenlab.techniques.preemption_server", "greenlab.techniques.storage",
                    "greenlab.techniques.monitoring"]),
    ("course", ["greenlab.course", "greenlab.checks", "greenlab.quiz", "greenlab.reference",
                "greenlab.recipes", "greenlab.leaderboard", "greenlab.energy_cell", "greenlab.nbgrader_export",
                "greenlab.nbgrader_preprocessor"]),
    ("widgets", ["greenlab.widgets", "greenlab.magics"]),
    ("cli", ["greenlab.cli", "greenlab.run_command", "greenlab.energy.command"]),
    ("face", ["greenlab"]),
]
RANK = {entry: rank for rank, (_, entries) in enumerate(LAYERS) for entry in entries}
NAMES = [name for name, _ in LAYERS]


def modules(package: Path = PACKAGE) -> dict:
    """Dotted module name -> (path, is a package) for every module under ``package``."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports(known: dict) -> dict:
    """Module -> the set of greenlab modules it imports, anywhere in its code."""
    graph = {}
    for name, (path, is_package) in known.items():
        here = name if is_package else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in known else base)
        graph[name] = {m for m in (_owner(t, known) for t in targets) if m and m != name}
        for target in list(graph[name]):  # a package's __init__ runs when entered from outside it
            parent = target.rpartition(".")[0]
            while parent and parent != name and not name.startswith(parent + "."):
                graph[name].add(parent)
                parent = parent.rpartition(".")[0]
    return graph


def layer(module: str) -> int | None:
    best = None
    for entry in RANK:
        inside = module == entry or (entry != "greenlab" and module.startswith(entry + "."))
        if inside and (best is None or len(entry) > len(best)):
            best = entry
    return None if best is None else RANK[best]


def cycles(graph: dict) -> list:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _owner(target: str, known: dict) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


KNOWN = modules()
GRAPH = imports(KNOWN)


def test_every_module_has_a_layer():
    missing = sorted(m for m in KNOWN if layer(m) is None)
    assert not missing, f"give these modules a layer in tests/test_layering.py LAYERS: {missing}"


def test_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "import cycles (each a set of modules that import each other):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def test_no_module_imports_a_layer_above_its_own():
    upward = sorted(f"{a} ({NAMES[layer(a)]}) imports {b} ({NAMES[layer(b)]})"
                    for a, targets in GRAPH.items() for b in targets
                    if layer(a) is not None and layer(b) is not None and layer(b) > layer(a))
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def test_nothing_but_the_face_imports_the_face():
    users = sorted(a for a, targets in GRAPH.items() if "greenlab" in targets)
    assert not users, f"these modules import the package face (greenlab/__init__.py): {users}"


# Packages whose imports of greenlab stand at the top of their modules, where a reader sees what a module
# needs: an import that must stay inside a function (an optional dependency, a heavy import on a cold path)
# ends with a "# lazy: <why>" comment. The list grows layer by layer, from the bottom.
AT_THE_TOP = ["greenlab.base", "greenlab.energy", "greenlab.impact", "greenlab.session", "greenlab.training",
              "greenlab.experiments", "greenlab.techniques", "greenlab.course", "greenlab.widgets", "greenlab.cli"]


def deferred_imports(known: dict, packages=AT_THE_TOP) -> list:
    """"module:line: import" for every greenlab import inside a function, in ``packages``, without a
    ``# lazy:`` reason on its last line."""
    found = []
    for name, (path, _) in sorted(known.items()):
        if not any(name == p or name.startswith(p + ".") for p in packages):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for func in ast.walk(ast.parse(text, str(path))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Import):
                    inside = any(a.name.split(".")[0] == "greenlab" for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    inside = bool(node.level) or (node.module or "").split(".")[0] == "greenlab"
                else:
                    continue
                if inside and "# lazy:" not in lines[node.end_lineno - 1]:
                    found.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(found))


def test_greenlab_imports_stand_at_the_top_of_a_module_unless_marked_lazy():
    found = deferred_imports(KNOWN)
    assert not found, ("move these imports to the top of their module, or say why one must wait with a "
                       "trailing '# lazy: <why>':\n" + "\n".join(found))


# --- the checker itself can fail -----------------------------------------------------------------


def test_an_unmarked_import_inside_a_function_is_found_and_a_marked_one_is_not(tmp_path):
    known = _tree(tmp_path, {"__init__.py": "", "base/__init__.py": "",
                             "base/a.py": "def f():\n    from greenlab.base import b\n",
                             "base/b.py": "def g():\n    import greenlab.base.a  # lazy: a cold path\n",
                             "cli.py": "def h():\n    from greenlab.base import a\n"})
    assert deferred_imports(known, ["greenlab.base"]) == ["greenlab.base.a:2: from greenlab.base import b"]

def _tree(tmp_path: Path, files: dict) -> dict:
    for rel, text in files.items():
        path = tmp_path / "greenlab" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return modules(tmp_path / "greenlab")


def test_a_cycle_closed_inside_a_function_is_found(tmp_path):
    known = _tree(tmp_path, {"__init__.py": "", "a.py": "from greenlab import b\n",
                             "b.py": "def f():\n    from greenlab.a import x\n"})
    assert cycles(imports(known)) == [["greenlab.a", "greenlab.b"]]


def test_relative_and_package_imports_are_resolved(tmp_path):
    known = _tree(tmp_path, {"__init__.py": "", "p/__init__.py": "from .q import y\n",
                             "p/q.py": "from ..r import z\n", "r.py": "import greenlab.p.q\n"})
    graph = imports(known)
    assert graph["greenlab.p.q"] == {"greenlab.r"}
    assert graph["greenlab.r"] == {"greenlab.p.q", "greenlab.p"}  # entering p runs its __init__
    assert graph["greenlab.p"] == {"greenlab.p.q"}
    assert cycles(graph) == [["greenlab.p", "greenlab.p.q", "greenlab.r"]]


@pytest.mark.parametrize("module, expected", [
    ("greenlab.energy.nvml", "energy"), ("greenlab.energy.command", "cli"), ("greenlab", "face"),
    ("greenlab.training.loop", "training"), ("greenlab.training.resume", "training"),
    ("greenlab.experiments.verdicts", "experiments"), ("greenlab.cli.doctor", "cli"),
    ("greenlab.cli.data", "cli"), ("greenlab.nowhere", None)])
def test_a_module_takes_the_layer_of_its_longest_entry(module, expected):
    assert (NAMES[layer(module)] if layer(module) is not None else None) == expected
