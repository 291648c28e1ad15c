"""The package's structure (issue 19): its import graph, module-level and function-level imports alike, has no
cycles, and no module imports another module's private names."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "vrs_helpers"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path):
    """(imported module, names) for every import in the file, relative imports resolved."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("vrs_helpers"):
                    yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("vrs_helpers"):
                continue
            names = [a.name for a in node.names]
            if node.module is None or not (PKG.parent / (target.replace(".", "/") + ".py")).is_file() and \
                    (PKG.parent / target.replace(".", "/")).is_dir():
                # "from . import mixed" / "from .mixed import fit": submodules named are modules themselves
                subs = [n for n in names if (PKG.parent / target.replace(".", "/") / (n + ".py")).is_file()
                        or (PKG.parent / target.replace(".", "/") / n).is_dir()]
                for s in subs:
                    yield f"{target}.{s}", []
                names = [n for n in names if n not in subs]
                if names or not subs:
                    yield target, names
            else:
                yield target, names


def _graph():
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    edges = {m: set() for m in modules}
    private = []
    for m, p in modules.items():
        for target, names in _imports(p):
            if target not in modules:
                continue
            if target != m:
                edges[m].add(target)
            private += [(m, target, n) for n in names if n.startswith("_") and not n.startswith("__")]
    return edges, private


def _cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    """Control: the parser sees real edges (a graph with no edges has no cycles either)."""
    edges, _ = _graph()
    assert "vrs_helpers.mixed.models.results" in edges["vrs_helpers.mixed.models.marginal"] or \
        "vrs_helpers.mixed" in edges["vrs_helpers.mixed.models.marginal"]
    assert sum(len(v) for v in edges.values()) > 30


def test_import_graph_has_no_cycles():
    edges, _ = _graph()
    # a package's __init__ re-exports its modules: an edge from a submodule to its own package's __init__ would
    # be a cycle in Python's import order too, so it counts
    assert _cycles(edges) == []


def test_no_private_names_imported_across_modules():
    _, private = _graph()
    assert private == [], private


# The layers, bottom to top: a module may import from its own layer and the ones below, never from one above.
LAYERS = ["mixed", "book", "evaluate", "app"]


def _layer(module: str) -> int:
    """-1 for the shared modules at the top level (errors, outcomes, threads, ...), else the layer's index."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else -1


def test_layers_import_only_downwards():
    edges, _ = _graph()
    up = [(m, t) for m, targets in edges.items() for t in targets
          if _layer(t) > _layer(m) and t != "vrs_helpers"]
    assert up == [], "imports from a higher layer: " + ", ".join(f"{m} -> {t}" for m, t in up)
    # the shared top-level modules import no layer at all
    shared = [(m, t) for m, targets in edges.items() for t in targets if _layer(m) == -1 and _layer(t) >= 0
              and m != "vrs_helpers"]
    assert shared == [], shared


def test_few_top_level_modules_and_no_long_module():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 8, f"{len(top)} modules at the top level of vrs_helpers/ (at most 8): {top}"
    assert {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"} >= set(LAYERS)
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert long == {}, f"modules over 800 lines: {long}"


# Within the engine and the your-own-data layer, subpackages in layers too (issue 51): bottom to top.
SUBLAYERS = {"mixed": ["structure", "likelihood", "inference", "models", "resampling"],
             "evaluate": ["tables", "logs", "presentation"]}


@pytest.mark.parametrize("package", sorted(SUBLAYERS))
def test_subpackages_import_only_downwards(package):
    """mixed.structure never imports mixed.models, evaluate.tables never imports evaluate.presentation, ... (the
    package's own top-level modules are outside the order: evaluate.files and evaluate.options serve every
    subpackage, evaluate.analysis uses them all)."""
    order = SUBLAYERS[package]

    def level(module):
        parts = module.split(".")
        if len(parts) < 3 or parts[1] != package:
            return None
        return order.index(parts[2]) if parts[2] in order else None

    edges, _ = _graph()
    up = [(m, t) for m, targets in edges.items() for t in targets
          if level(m) is not None and level(t) is not None and level(t) > level(m)]
    assert up == [], "imports from a higher sublayer: " + ", ".join(f"{m} -> {t}" for m, t in up)
