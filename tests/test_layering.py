"""The layering rules of docs/architecture.md, read from the source with `ast`.

Every `import` / `from ... import` statement of every module under `swan_jax/` counts,
at module level or inside a function (a function-level import still ties two modules);
the circle check and the rule "the project's own imports at module top" read every
package of the repository (`REPO_PACKAGES`).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "swan_jax"
# This repository's tooling (RESULTS.md, the campaign): imports swan_jax, never imported by it.
REPO_TOOL = "reproduce"

# The core: the graph, the field, its integration and the models, and what they stand on.
CORE = ("swan_jax.graph", "swan_jax.config", "swan_jax.settings", "swan_jax.field",
        "swan_jax.solvers", "swan_jax.models", "swan_jax.gps",
        "swan_jax.encoders",
        "swan_jax.ogb_vocabulary",
        "swan_jax.pytrees", "swan_jax.compiles", "swan_jax.losses", "swan_jax.metrics")
# The packages above the core, lowest first (docs/architecture.md's layers): each stands
# at one height, importing the core, the packages below it and itself, never one above.
HEIGHTS = ("swan_jax.data", "swan_jax.runs", "swan_jax.train", "swan_jax.experiments")
# May import: (besides themselves). The package root (`swan_jax`) is the public face and
# imports the core and `analysis`; `experiments` may import everything.
ALLOWED = {
    "swan_jax.graph": ("swan_jax.graph",),
    "swan_jax.analysis": CORE + ("swan_jax.analysis",),
    "swan_jax.data": ("swan_jax.graph", "swan_jax.ogb_vocabulary", "swan_jax.data",
                      "swan_jax.settings"),
    # a run's files, one height: what train saves with (io, interrupts, checkpoint), a
    # model's predictions (inference, on data) and its export as files (export, on the
    # core); reading a trained run's folder stands above train (`experiments.runs`)
    "swan_jax.runs": CORE + ("swan_jax.data", "swan_jax.runs"),
    "swan_jax.runs.io": ("swan_jax.settings",),
    "swan_jax.runs.interrupts": (),
    "swan_jax.runs.checkpoint": ("swan_jax.settings", "swan_jax.runs.io",
                                 "swan_jax.runs.interrupts", "swan_jax.models.formation"),
    "swan_jax.runs.export": CORE,
    "swan_jax.train": CORE + ("swan_jax.data", "swan_jax.runs", "swan_jax.train"),
}
# isinstance between graph layouts still outside swan_jax.graph (to use `is_graph`).
PENDING_LAYOUT_CHECKS: frozenset[str] = frozenset()
LAYOUT_TYPES = ("PreparedGraph", "GraphsTuple", "SlotGraph", "SegmentGraph")
# Known circles still to break: none (issue 21 broke export <-> experiments.predict).
PENDING_CIRCLES: list[list[str]] = []


REPO = PACKAGE.parent
# Every package of the repository: the library, its tooling, the benchmarks, the studies
# beside their reports, the scripts and the tests' helpers.
REPO_PACKAGES = ("swan_jax", "reproduce", "benchmarks", "reproductions", "experiments",
                 "tests")
# Where the project's own imports stand at module top (a function-level one hides a tie).
# The two differential studies import swan_jax inside their steps: the authors' steps run
# in a venv with torch and without JAX (tests/test_graphprop_differentials.py).
TOP_LEVEL_IMPORTS = ("reproduce/__init__.py", "reproduce/campaign", "reproductions/jacobian.py",
                     "reproduce/device.py", "benchmarks/runtime_table.py",
                     "reproductions/_differential.py", "reproductions/graphprop-plateau")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules(tops: tuple[str, ...] = ("swan_jax",)) -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(), str(p))
            for top in tops for p in sorted((REPO / top).rglob("*.py"))}


def _targets(name: str, node: ast.Import | ast.ImportFrom,
             tops: tuple[str, ...] = ("swan_jax",)) -> list[str]:
    """The project modules (under `tops`) an import statement loads (`from pkg import mod`
    -> `pkg.mod`)."""
    modules = _modules(tops)
    if isinstance(node, ast.Import):
        found = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name if _is_package(name) else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        found = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                 for alias in node.names]
    out = []
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target.split(".")[0] in tops:
            out.append(target)
    return out


def _is_package(name: str) -> bool:
    return (REPO / name.replace(".", "/") / "__init__.py").exists()


@functools.cache
def _imports(tops: tuple[str, ...] = ("swan_jax",)) -> dict[str, frozenset[str]]:
    return {name: frozenset(t for node in ast.walk(tree)
                            if isinstance(node, ast.Import | ast.ImportFrom)
                            for t in _targets(name, node, tops) if t != name)
            for name, tree in _modules(tops).items()}


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_parser_sees_the_known_imports():
    imports = _imports()
    assert "swan_jax.graph.prepared" in imports["swan_jax.graph.gather"]
    assert "swan_jax.graph.gather" in imports["swan_jax.graph.slots"]  # from pkg import mod
    assert {"swan_jax.graph", "swan_jax.solvers"} <= imports["swan_jax.models"]


def _circles(imports: dict[str, frozenset[str]]) -> list[list[str]]:
    """Every import circle (its modules, sorted), outside `PENDING_CIRCLES`."""
    graph = nx.DiGraph((name, target) for name, targets in imports.items()
                       for target in targets)
    # A package's __init__ imports its modules; a module does not import its package back
    # unless it names it, so a package-level edge is an edge like any other.
    circles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    return [c for c in circles if c not in PENDING_CIRCLES]


def test_no_import_circle():
    assert _circles(_imports()) == [], f"import circles: {_circles(_imports())}"


def test_no_import_circle_anywhere_in_the_repository():
    """Over every package of the repository, function-level imports included (the
    campaign's __main__ <-> loop <-> merge ... and runner <-> shapes circles are gone)."""
    imports = _imports(REPO_PACKAGES)
    assert "reproduce.campaign.loop" in imports["reproduce.campaign.merge"]
    assert _circles(imports) == [], f"import circles: {_circles(imports)}"


def _function_level_imports(path: Path) -> list[str]:
    """`file:line module` of each import of the project's own modules inside a function."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or "."] if isinstance(node, ast.ImportFrom) else [])
                where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
                found += [f"{where}:{node.lineno} {n}" for n in names
                          if n.split(".")[0] in REPO_PACKAGES or n.startswith(".")]
    return found


def test_the_project_s_own_imports_stand_at_module_top(tmp_path):
    files = [p for area in TOP_LEVEL_IMPORTS for p in (
        sorted((REPO / area).rglob("*.py")) if (REPO / area).is_dir() else [REPO / area])]
    assert len(files) > 8
    hidden = [line for path in files for line in _function_level_imports(path)]
    assert hidden == [], f"imports inside functions: {hidden}"
    example = tmp_path / "example.py"  # the check would catch one
    example.write_text("def f():\n    from reproduce.campaign import loop\n")
    assert _function_level_imports(example) == ["example.py:2 reproduce.campaign"]


def test_the_circle_check_would_catch_the_old_export_circle():
    """The circle issue 21 broke: export.export_run imported experiments.predict inside a
    function while predict imports export; a function-level import counts."""
    tree = ast.parse("def export_run():\n    from swan_jax.experiments.predict import "
                     "open_run\n")
    back = {t for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            for t in _targets("swan_jax.runs.export", node)}
    assert back == {"swan_jax.experiments.predict"}
    imports = dict(_imports())
    assert "swan_jax.runs.export" in imports["swan_jax.experiments.predict"]
    imports["swan_jax.runs.export"] = imports["swan_jax.runs.export"] | back
    assert ["swan_jax.experiments.predict", "swan_jax.runs.export"] in _circles(imports)


def _above(name: str, targets) -> list[str]:
    """The imports of `name` that reach a package standing above its own in `HEIGHTS`
    (the core, `analysis` and the root stand below them all)."""
    [own] = [i for i, p in enumerate(HEIGHTS) if _within(name, (p,))] or [-1]
    return sorted(t for t in targets if _within(t, HEIGHTS[own + 1:]))


def test_each_package_stands_at_one_height():
    found = {name: _above(name, targets) for name, targets in _imports().items()}
    found = {name: above for name, above in found.items() if above}
    assert found == {}, f"imports of a package standing higher ({HEIGHTS}): {found}"
    # ... and would catch the export that imported train from below it (issue 49)
    assert _above("swan_jax.runs.export", {"swan_jax.train", "swan_jax.config"}) == [
        "swan_jax.train"]
    assert _above("swan_jax.train._loop", {"swan_jax.runs.checkpoint"}) == []
    assert _above("swan_jax.field", {"swan_jax.data.batching"}) == ["swan_jax.data.batching"]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_what_it_may(layer):
    bad = {name: sorted(t for t in targets if not _within(t, ALLOWED[layer]))
           for name, targets in _imports().items() if _within(name, (layer,))}
    bad = {name: targets for name, targets in bad.items() if targets}
    assert bad == {}, f"{layer} may import only {ALLOWED[layer]}; found {bad}"


def test_the_core_imports_only_the_core():
    bad = {name: sorted(t for t in targets if not _within(t, CORE))
           for name, targets in _imports().items() if _within(name, CORE)}
    bad = {name: targets for name, targets in bad.items() if targets}
    assert bad == {}, f"the core imports outside itself (experiments, data, train...): {bad}"


# The package root holds the core and its public face (`__init__`), nothing else (issue 40):
# run files live in `swan_jax.runs`, commands in `swan_jax.experiments`.
MAX_ROOT_MODULES = 12


def _root_problems(names: list[str]) -> list[str]:
    outside = [f"not core: swan_jax/{n}.py" for n in names if f"swan_jax.{n}" not in CORE]
    count = [f"{len(names)} modules in the root, at most {MAX_ROOT_MODULES}"]
    return outside + (count if len(names) > MAX_ROOT_MODULES else [])


def test_the_package_root_holds_the_core_only():
    names = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert _root_problems(names) == []
    # ... and would say so of a run file or a thirteenth module
    assert _root_problems([*names, "checkpoint"]) == ["not core: swan_jax/checkpoint.py"]
    assert _root_problems(["config"] * 13) == ["13 modules in the root, at most 12"]


def test_the_package_root_is_the_core_and_analysis():
    outside = sorted(t for t in _imports()["swan_jax"]
                     if not _within(t, CORE + ("swan_jax.analysis",)))
    assert outside == [], f"swan_jax/__init__.py imports beyond the core: {outside}"


# Where `import swan_jax...` is written outside the package (the tests may open private
# modules: they test them).
OUTSIDE = ("benchmarks", "reproduce", "reproductions", "experiments", "notebooks")


def _private_owner(target: str) -> str | None:
    """`swan_jax.train._loop` -> `swan_jax.train` (the package whose private module it is);
    None for a public module."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _private_imports(name: str, tree: ast.Module) -> list[str]:
    """The private swan_jax modules `name`'s imports open outside their own package."""
    return sorted({t for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
                   and (name.startswith("swan_jax") or not getattr(node, "level", 0))
                   for t in _targets(name, node)
                   if (owner := _private_owner(t)) and not _within(name, (owner,))})


def test_nothing_outside_a_package_imports_its_private_modules():
    """A package's `_modules` are reached through its `__init__`'s names (`swan_jax.train`
    re-exports what the experiments and benchmarks use), never from another package."""
    found = {name: _private_imports(name, tree) for name, tree in _modules().items()}
    for folder in OUTSIDE:
        for path in sorted((PACKAGE.parent / folder).rglob("*.py")):
            name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
            found[name] = _private_imports(name, ast.parse(path.read_text(), str(path)))
    found = {name: targets for name, targets in found.items() if targets}
    assert found == {}, f"private modules imported from outside their package: {found}"
    # ... and would catch the benchmarks' imports before issue 40
    old = ast.parse("from swan_jax.train import TrainConfig, _loop\n"
                    "from swan_jax.train._fused import can_fuse\n")
    assert _private_imports("benchmarks.epoch_anatomy", old) == [
        "swan_jax.train._fused", "swan_jax.train._loop"]
    assert _private_imports("swan_jax.train._loop", old) == []


def _absolute_imports(tree: ast.Module) -> set[str]:
    """Every absolute module name a tree's import statements name (relative ones are
    inside swan_jax by construction)."""
    return {name for node in ast.walk(tree)
            for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom)
                         and not node.level else [])}


def test_nothing_under_swan_jax_imports_the_repository_tool():
    """The installed package stands alone: the RESULTS.md renderer and the campaign live
    in the repository's `reproduce/` (not shipped); they import swan_jax, never the reverse."""
    users = {name: sorted(m for m in _absolute_imports(tree) if _within(m, (REPO_TOOL,)))
             for name, tree in _modules().items()}
    users = {name: found for name, found in users.items() if found}
    assert users == {}, f"swan_jax imports the repository tool {REPO_TOOL}/: {users}"


def test_the_repository_tool_check_would_catch_an_import():
    tree = ast.parse("def f():\n    from reproduce.results import render\n"
                     "import reproduce.campaign, os\n")
    assert {m for m in _absolute_imports(tree) if _within(m, (REPO_TOOL,))} == {
        "reproduce.results", "reproduce.campaign"}
    tool = PACKAGE.parent / REPO_TOOL
    assert any(_within(m, ("swan_jax",)) for p in tool.rglob("*.py")
               for m in _absolute_imports(ast.parse(p.read_text())))


def _names(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, ast.Name | ast.Attribute)}


def test_only_the_graph_package_tells_layouts_apart():
    found = {}
    for name, tree in _modules().items():
        if _within(name, ("swan_jax.graph",)) or name in PENDING_LAYOUT_CHECKS:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
                    and _names(node.args[1]) & set(LAYOUT_TYPES)):
                found.setdefault(name, []).append(node.lineno)
    assert found == {}, (f"isinstance between graph layouts outside swan_jax.graph (use "
                         f"swan_jax.graph.as_operator / is_graph): {found}")


def test_the_layering_test_would_catch_a_layout_check():
    tree = ast.parse("import jraph\nok = isinstance(g, jraph.GraphsTuple | PreparedGraph)\n")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert _names(calls[0].args[1]) & set(LAYOUT_TYPES) == {"GraphsTuple", "PreparedGraph"}


def test_each_layout_implements_the_protocol():
    import inspect

    from swan_jax.graph import GraphOps, SegmentGraph, SlotGraph

    def shape(fn):  # names, kinds and defaults (each layout names its own types)
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    wanted = {name: shape(fn) for name, fn in vars(GraphOps).items()
              if inspect.isfunction(fn) and not name.startswith("_")}
    assert {"aggregate", "mix", "operators", "in_degree", "validate"} <= set(wanted)
    for layout in (SegmentGraph, SlotGraph):
        for name, signature in wanted.items():
            assert name in vars(layout), f"{layout.__name__} lacks {name}"
            assert shape(getattr(layout, name)) == signature, (layout, name)
