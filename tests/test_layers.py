"""The layers import one way: hdl -> contract, sim -> hdl + contract, model -> contract, and only
the CLI layer (fred.cli, fred.commands, fred.benchmarks, fred.bench, fred.run) imports everything.

Every ``import`` statement of every module is parsed (function-local ones included, so a lazy
import cannot hide an edge); cross-package imports outside the CLI layer must stand at module top
level, where a reader and a dependency tool see them; no two packages import each other; and
inside a package the module graph has no circle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: source folder -> package
PACKAGES = {"contract": "fred.contract", "hdl": "fred.hdl", "sim": "fred.sim", "model": "fred.model",
            "fred": "fred"}
#: layer -> the layers it may import (besides itself and the ``fred`` root, which holds only
#: ``__version__`` and ``FredError``)
ALLOWED = {
    "contract": set(),
    "hdl": {"contract"},
    "sim": {"hdl", "contract"},
    "model": {"contract"},
    "cli": {"contract", "hdl", "sim", "model"},
}


def _modules():
    out = {}
    for folder, pkg in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            out[name] = (path, path.name == "__init__.py")
    return out


MODULES = _modules()


def layer(modname: str) -> str | None:
    """The layer of a ``fred`` module name (None: not ours, or the ``fred`` root)."""
    parts = modname.split(".")
    if parts[0] != "fred" or len(parts) == 1:
        return None
    sub = parts[1]
    if sub in ("hdl", "sim", "model", "contract"):
        return sub
    return "cli"


def _imports(name):
    """(imported module, line, at top level) for every import in module ``name``."""
    path, is_pkg = MODULES[name]
    tree = ast.parse(path.read_text(), str(path))
    top = set(id(n) for n in tree.body)
    pkg_parts = name.split(".") if is_pkg else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                found.append((a.name, node.lineno, id(node) in top))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[:len(pkg_parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod]
            # "from fred.model import params" imports the module fred.model.system.params
            targets += [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES]
            for t in targets:
                found.append((t, node.lineno, id(node) in top))
    return [(t, line, at_top) for t, line, at_top in found if t.split(".")[0] == "fred"]


EDGES = {name: _imports(name) for name in MODULES}


def test_every_package_is_seen():
    for pkg in ("fred.hdl.cells.microswitches", "fred.sim.toolchain", "fred.model.collectives.flowsim", "fred.contract.timing",
                "fred.cli", "fred.commands.estimate"):
        assert pkg in MODULES


def test_import_directions():
    bad = []
    for name, edges in EDGES.items():
        src = layer(name)
        if src is None:
            bad += [f"{name}:{line} imports {t} (the fred root imports nothing)" for t, line, _ in edges]
            continue
        for target, line, _ in edges:
            dst = layer(target)
            if dst is None or dst == src:
                continue
            if dst not in ALLOWED[src]:
                bad.append(f"{MODULES[name][0].relative_to(ROOT)}:{line}: {src} imports {target} ({dst})")
    assert not bad, "forbidden import direction:\n" + "\n".join(bad)


def test_cross_package_imports_at_top_level():
    bad = []
    for name, edges in EDGES.items():
        src = layer(name)
        if src in (None, "cli"):
            continue   # the CLI imports lazily on purpose: `fred --help` must start fast
        for target, line, at_top in edges:
            dst = layer(target)
            if dst not in (None, src) and not at_top:
                bad.append(f"{MODULES[name][0].relative_to(ROOT)}:{line}: {target}")
    assert not bad, "cross-package import hidden inside a function:\n" + "\n".join(bad)


def _cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def _module_graph():
    g = {}
    for name, edges in EDGES.items():
        g[name] = sorted({t for t, _, _ in edges if t in MODULES and t != name
                          and not name.startswith(t + ".")})  # a module's own package __init__
    return g


def test_no_circle_between_layers():
    g = {}
    for name, targets in _module_graph().items():
        a = layer(name)
        for t in targets:
            b = layer(t)
            if a and b and a != b:
                g.setdefault(a, set()).add(b)
    assert _cycles(set(g) | {x for v in g.values() for x in v}, g) == []


def test_no_circle_inside_a_layer():
    found = _cycles(set(MODULES), _module_graph())
    found = [c for c in found if all(layer(x) != "cli" for x in c)]
    assert found == [], f"module circles: {found}"


# ---- inside a layer: one subpackage per concept, imports down the tiers only --------------------

#: per layer, its units (a subpackage, or a module at the layer's top) in tiers: a unit imports only
#: units of lower tiers (never its own tier, never a higher one), so the folders read bottom-up
TIERS = {
    "fred.hdl": [["params", "dtypes", "verilog", "physical"], ["netlist", "adders"],
                 ["routing", "cells", "crossbar"], ["fabric"], ["switch"]],
    "fred.sim": [["toolchain", "equiv", "golden"], ["faults", "lint", "formal", "compiled"], ["benches"],
                 ["characterize"], ["soak", "coverage"]],
    "fred.model": [["system"], ["network"], ["collectives"], ["workload", "inputs"], ["schedule"],
                   ["training", "inference"], ["plots"]],
}
#: the most modules one folder of a layer holds (issue: a folder is a concept, not a drawer)
MAX_FOLDER_MODULES = 13


def unit(modname: str) -> str | None:
    """The unit of a module inside its layer: ``fred.model.training.scanner`` -> ``fred.model.training``."""
    parts = modname.split(".")
    if len(parts) < 3 or ".".join(parts[:2]) not in TIERS:
        return None
    return ".".join(parts[:3])


def _tier(u: str) -> int:
    layer_pkg, name = u.rsplit(".", 1)
    for i, names in enumerate(TIERS[layer_pkg]):
        if name in names:
            return i
    raise AssertionError(f"{u} is in no tier of tests/test_layers.py TIERS: add it")


def test_subpackage_directions():
    bad = []
    for name, targets in _module_graph().items():
        a = unit(name)
        for t in targets:
            b = unit(t)
            if not a or not b or a == b or a.rsplit(".", 1)[0] != b.rsplit(".", 1)[0]:
                continue
            if _tier(b) >= _tier(a):
                bad.append(f"{MODULES[name][0].relative_to(ROOT)}: {a} imports {t} (tier {_tier(b)} >= {_tier(a)})")
    assert not bad, "import against the subpackage tiers:\n" + "\n".join(bad)


def test_no_circle_between_subpackages():
    g = {}
    for name, targets in _module_graph().items():
        for t in targets:
            a, b = unit(name), unit(t)
            if a and b and a != b:
                g.setdefault(a, set()).add(b)
    assert _cycles(set(g) | {x for v in g.values() for x in v}, g) == []


def test_every_unit_has_a_tier_and_folders_stay_small():
    too_big = []
    for folder in ("hdl", "sim", "model"):
        for d in [ROOT / folder, *sorted(p for p in (ROOT / folder).iterdir() if (p / "__init__.py").exists())]:
            mods = [p for p in d.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
            if len(mods) > MAX_FOLDER_MODULES:
                too_big.append(f"{d.relative_to(ROOT)}: {len(mods)} modules")
    assert not too_big, too_big
    for name in MODULES:
        if unit(name):
            _tier(unit(name))


def private_imports(name: str, tree: ast.AST | None = None) -> list[str]:
    """The imports of module ``name`` that reach into another subpackage's private file for a
    name (``from fred.model.training.estimator import estimate`` instead of ``from
    fred.model.training import estimate``); importing a submodule itself is fine."""
    path, _ = MODULES[name]
    tree = tree or ast.parse(path.read_text(), str(path))
    own = unit(name)
    bad = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            continue
        target = unit(node.module)
        if target is None or target == own or node.module == target or target not in MODULES:
            continue   # not a subpackage (a top module of a layer), its own, or the subpackage itself
        if not MODULES[target][1]:
            continue   # a module at a layer's top, not a subpackage
        if all(f"{node.module}.{a.name}" in MODULES for a in node.names):
            continue
        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import ... "
                   f"(import it from {target})")
    return bad


def test_callers_import_from_the_subpackage():
    bad = [b for name in MODULES for b in private_imports(name)]
    assert not bad, "names imported from a subpackage's private file:\n" + "\n".join(bad)


def test_private_import_rule_sees_what_it_checks():
    tree = ast.parse("from fred.model.training.estimator import estimate\n"
                     "from fred.model.training import scan\n")
    assert len(private_imports("fred.cli", tree)) == 1


def test_tier_rule_sees_what_it_checks(monkeypatch):
    """A reversed edge (schedule -> training) is reported."""
    graph = _module_graph()
    graph = {**graph, "fred.model.schedule.iteration": graph["fred.model.schedule.iteration"]
             + ["fred.model.training.estimator"]}
    monkeypatch.setattr(sys.modules[__name__], "_module_graph", lambda: graph)
    with pytest.raises(AssertionError, match="schedule imports fred.model.training.estimator"):
        test_subpackage_directions()


@pytest.mark.parametrize("pkg, forbidden", [
    ("fred.contract", ("fred.hdl", "fred.sim", "fred.model", "amaranth", "cocotb")),
    ("fred.hdl", ("fred.sim", "fred.model", "cocotb")),
    ("fred.model", ("fred.hdl", "fred.sim", "amaranth", "cocotb")),
])
def test_layer_imports_alone(pkg, forbidden):
    """Importing every module of a layer loads nothing of the layers it must not depend on."""
    mods = [n for n in MODULES if n == pkg or n.startswith(pkg + ".")]
    code = ("import importlib, sys\n"
            f"for m in {mods!r}:\n    importlib.import_module(m)\n"
            f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r} "
            f"or any(m == f or m.startswith(f + '.') for f in {forbidden!r}))\n"
            "print(' '.join(bad))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "tests")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"{pkg} loaded {r.stdout.strip()}"


# ---- sizes: small modules, short functions -----------------------------------------------------

#: folders whose modules and functions are held to the size rule (CONTRIBUTING.md, "Style")
SIZED = ("contract", "hdl", "sim", "model", "fred")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
#: a longer function says why in a comment line starting with this, within its first lines
LONG_MARK = "# long:"
LONG_MARK_WITHIN = 10


def oversized(path: Path) -> list[str]:
    """What in the Python file ``path`` breaks the size rule: the module over
    ``MAX_MODULE_LINES`` lines, a function over ``MAX_FUNCTION_LINES`` lines without a
    ``# long: <reason>`` comment in its first ``LONG_MARK_WITHIN`` lines."""
    text = path.read_text()
    lines = text.splitlines()
    bad = []
    if len(lines) > MAX_MODULE_LINES:
        bad.append(f"{path.name}: {len(lines)} lines (most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text, str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        n = node.end_lineno - node.lineno + 1
        if n <= MAX_FUNCTION_LINES:
            continue
        head = lines[node.lineno - 1:node.lineno - 1 + LONG_MARK_WITHIN]
        if not any(ln.strip().startswith(LONG_MARK) and ln.strip()[len(LONG_MARK):].strip() for ln in head):
            bad.append(f"{path.name}:{node.lineno}: {node.name} is {n} lines (most {MAX_FUNCTION_LINES} "
                       f"without a '{LONG_MARK} <reason>' comment in its first {LONG_MARK_WITHIN} lines)")
    return bad


def test_size_rule_sees_what_it_checks(tmp_path):
    """The checker flags a long module and an unexplained long function, and accepts a reason."""
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    long_fn = tmp_path / "f.py"
    long_fn.write_text("def f():\n" + body)
    assert len(oversized(long_fn)) == 1
    long_fn.write_text("def f():\n    # long: one table, clearer in one piece\n" + body)
    assert oversized(long_fn) == []
    long_fn.write_text("def f():\n    # long:\n" + body)            # a mark without a reason
    assert len(oversized(long_fn)) == 1
    big = tmp_path / "m.py"
    big.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert len(oversized(big)) == 1


@pytest.mark.parametrize("folder", SIZED)
def test_modules_and_functions_are_small(folder):
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        bad += [f"{path.relative_to(ROOT).parent}/{x}" for x in oversized(path)]
    assert not bad, "too long (split it, or say why at the top of the function):\n" + "\n".join(bad)
