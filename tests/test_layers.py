"""The import graph of the tree: which package may import which (the full matrix, ALLOWED), and no
circle between modules. Checked on the source, so a lazy import inside a function counts too (that
is where `from app import emit` used to hide, and where two circles did: the NIAH evaluation with
the QA evaluation, the Landmark baseline with the model).

Layers, bottom up: cli_io and kernels (none of ours); store (cli_io only: its UserError is the root
of every package's errors meant for people); drt_core, the model and the engine that serve it;
drt_core.train, training; drt_core.evals, the model's evaluations (NIAH and perplexity, on
training's needles), and drt_core.mine, the questions mined from the corpora (on training's token
files); ingest, documents into the library; qa, questions and summaries over it; ui; bench, which
may measure anything. app, the command line, names the command modules as strings and imports them
by name."""

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["app.py", "cli_io.py", "drt_core", "kernels", "ingest", "qa", "ui", "store", "bench"]

ALLOWED: dict[str, set[str]] = {
    "app": {"cli_io"},
    "cli_io": set(),
    "kernels": set(),
    "store": {"cli_io"},  # the errors meant for people: cli_io.UserError is their one root
    "drt_core": {"kernels", "store", "cli_io"},
    "drt_core.train": {"drt_core", "kernels", "store", "cli_io"},
    "drt_core.evals": {"drt_core.train", "drt_core", "kernels", "store", "cli_io"},
    "drt_core.mine": {"drt_core.train", "drt_core", "store", "cli_io"},
    "ingest": {"drt_core", "store", "cli_io"},
    "qa": {"ingest", "drt_core", "drt_core.mine", "store", "cli_io"},
    "ui": {"qa", "ingest", "drt_core", "store", "cli_io"},
    "bench": {"ui", "qa", "ingest", "drt_core", "drt_core.train", "drt_core.evals", "drt_core.mine", "kernels",
              "store", "cli_io"},
}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """{dotted module name: file} of every source file of ours."""
    out = {}
    for src in SOURCES:
        p = root / src
        for f in [p] if p.is_file() else sorted(p.rglob("*.py")) if p.is_dir() else []:
            parts = list(f.relative_to(root).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """{module: the modules of ours it imports}, relative imports resolved; `from pkg import name`
    points at pkg.name when that is a module, else at pkg."""
    mods = modules(root)

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    g: dict[str, set[str]] = defaultdict(set)
    for m, f in mods.items():
        here = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), filename=str(f))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            else:
                continue
            for t in targets:
                k = known(t)
                if k and k != m:
                    g[m].add(k)
    return g


SUBLAYERS = ("drt_core.train", "drt_core.evals", "drt_core.mine")  # packages of drt_core with a row of their own


def layer(module: str) -> str:
    return next((s for s in SUBLAYERS if module == s or module.startswith(s + ".")), module.split(".")[0])


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
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

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in list(g):
        if v not in index:
            visit(v)
    return out


def test_every_import_follows_the_layers():
    bad = sorted(f"{a} -> {b}" for a, bs in graph().items() for b in bs
                 if layer(a) != layer(b) and layer(b) not in ALLOWED[layer(a)])
    assert not bad, "imports against the layers (tests/test_layers.py ALLOWED):\n" + "\n".join(bad)


def test_every_package_has_a_row():
    assert {layer(m) for m in modules()} <= set(ALLOWED)


def test_no_import_circle():
    assert cycles(graph()) == []


def test_the_scan_sees_imports_inside_functions_and_circles(tmp_path, monkeypatch):
    # the checks must be able to fail: a lazy upward import in a function is found, and so is a circle
    pkg = tmp_path / "drt_core"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from app import emit\n    from . import b\n    return emit, b\n")
    (pkg / "b.py").write_text("from .a import f\n")
    (tmp_path / "app.py").write_text("")
    g = graph(tmp_path)
    assert g["drt_core.a"] == {"app", "drt_core.b"} and g["drt_core.b"] == {"drt_core.a"}
    assert cycles(g) == [["drt_core.a", "drt_core.b"]]
    assert "app" not in ALLOWED["drt_core"]



def test_no_package_imports_another_packages_command_module():
    # the library and the engine a command opens are ingest/session.py's: qa's commands (and any
    # other package) use them there, never through ingest's command module
    bad = sorted(f"{a} -> {b}" for a, bs in graph().items() for b in bs
                 if b.endswith(".cli") and layer(a) != layer(b))
    assert not bad, "\n".join(bad)
