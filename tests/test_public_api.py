"""The package root shows the user's API and nothing else; no module is another's alias.

`dir(swan_jax)` after `import swan_jax` (in a fresh interpreter: the tests' own imports
add subpackages to it) is `swan_jax.__all__`, at most `MAX_ROOT_NAMES` names; kernels,
validators and internals stay in their packages (`swan_jax.graph.checked`, ...), as
diffrax keeps its own.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "swan_jax"
MAX_ROOT_NAMES = 35


def _root_names() -> tuple[list[str], list[str]]:
    """The public names of a freshly imported `swan_jax`, and its `__all__`."""
    code = ("import json, swan_jax; print(json.dumps([sorted(n for n in dir(swan_jax) "
            "if not n.startswith('_')), swan_jax.__all__]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    names, declared = json.loads(done.stdout.splitlines()[-1])
    return names, declared


def test_the_root_shows_exactly_its_declared_names():
    names, declared = _root_names()
    assert len(declared) == len(set(declared)), "a name twice in swan_jax.__all__"
    assert sorted(declared) == names, (f"dir(swan_jax) beyond __all__: "
                                       f"{sorted(set(names) - set(declared))}; in __all__ "
                                       f"but missing: {sorted(set(declared) - set(names))}")
    assert len(names) <= MAX_ROOT_NAMES, f"{len(names)} public names in the root: {names}"
    # the user's API is there; kernels and validators are not
    assert {"SWANConfig", "SWANBlock", "Model", "solve", "vector_field", "SolverError",
            "analysis", "graph"} <= set(names)
    assert not {"gather", "checked", "traced_checks", "check_prepared", "clear_errors",
                "CompileCounter", "tree_size", "graphs"} & set(names)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {_module_name(p) for p in PACKAGE.rglob("__init__.py")}


def _renamed_modules(name: str, tree: ast.Module) -> list[str]:
    """A package's bindings of a swan_jax module under a name not its own (`from
    swan_jax.graph import builders as graphs` in the root): the same module twice in the
    namespace a user browses. (A module's private shorthand, `from swan_jax.data import
    node_classification as nc`, is no second name of the package.)"""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            pairs = [(a.name, a.asname) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("swan_jax"):
            pairs = [(f"{node.module}.{a.name}", a.asname) for a in node.names]
        else:
            continue
        found += [f"{name}: {target} as {alias}" for target, alias in pairs
                  if target in MODULES and alias and alias != target.rpartition(".")[2]]
    return found


def _only_reexports(tree: ast.Module) -> set[str] | None:
    """The modules a module's body imports from when that body is nothing but imports
    (beside its docstring and `__all__`); None when it holds anything else."""
    sources = set()
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
                "__all__"]:
            continue
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            sources.add(node.module or "")
        elif not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            return None
    return sources


def _alias_problems(modules: dict[str, ast.Module]) -> list[str]:
    problems = []
    for name, tree in modules.items():
        if name == "swan_jax" or name in PACKAGES:
            problems += _renamed_modules(name, tree)
        sources = _only_reexports(tree)
        if sources is not None and len(sources) == 1:
            problems.append(f"{name} only re-exports {sources.pop()}")
    return problems


def test_no_module_is_an_alias_of_another():
    modules = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}
    assert _alias_problems(modules) == []
    # ... and would catch the root's old `graphs` and a module that is another's copy
    old_root = ast.parse("from swan_jax.graph import builders as graphs\n"
                         "from swan_jax.graph import builders, gather\n"
                         "from swan_jax.config import SWANConfig\n")
    alias = ast.parse('"""Old name."""\nfrom swan_jax.graph.builders import *\n')
    assert _alias_problems({"swan_jax": old_root, "swan_jax.graphs": alias}) == [
        "swan_jax: swan_jax.graph.builders as graphs",
        "swan_jax.graphs only re-exports swan_jax.graph.builders"]
