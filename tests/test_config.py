"""`SWANConfig` read from its declarations: the traced settings, the pytree, the checks,
and the one bridge from a grid point (`SWANConfig.from_point`) that every experiment uses."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from swan_jax import config
from swan_jax.settings import Setting, coded_choices, setting, traced_value

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "swan_jax" / "experiments"


def test_the_traced_settings_are_the_declared_ones_and_the_pytree_leaves():
    """`traced=True` in a declaration makes a pytree leaf (a number always, a choice when
    traced, by its code); every other setting is static metadata."""
    assert config.TRACED_FIELDS == ("adjacency", "beta", "gamma", "epsilon")
    assert config.ADJACENCY_CODES == {"sym": 1.0, "adj": 0.0}
    assert coded_choices() == {"adjacency": {"sym": 1.0, "adj": 0.0}}
    named = sj.SWANConfig(beta=0.5, gamma=0.2, epsilon=0.3)
    assert jax.tree_util.tree_leaves(named) == [0.5, 0.2, 0.3]  # the name is static
    known = named.replace(adjacency=0.0)  # a known code is held by its name
    assert known.adjacency == "adj" and jax.tree_util.tree_leaves(known) == [0.5, 0.2, 0.3]
    coded = named.replace(adjacency=jnp.asarray(0.0))  # a run's code: a leaf
    assert jax.tree_util.tree_leaves(coded)[3] is coded.adjacency
    for cfg in (named, known, coded):  # a round trip keeps every setting
        leaves, tree = jax.tree_util.tree_flatten(cfg)
        assert jax.tree_util.tree_unflatten(tree, leaves) == cfg
    # vmapped over every traced setting at once: one program, a config per run
    batched = jax.vmap(lambda a, e: coded.replace(adjacency=a, epsilon=e).t1)(
        jnp.asarray([1.0, 0.0]), jnp.asarray([0.1, 0.2]))
    np.testing.assert_allclose(batched, [0.5, 1.0], rtol=1e-6)


def test_a_traced_setting_must_be_a_grid_axis_and_a_traced_choice_needs_codes():
    with pytest.raises(ValueError, match="declare it grid=True"):
        Setting(help="h", traced=True)
    with pytest.raises(ValueError, match="needs its codes"):
        Setting(help="h", choices=("a", "b"), grid=True, traced=True)
    with pytest.raises(ValueError, match="one number per choice"):
        Setting(help="h", choices=("a", "b"), codes=(1.0,), grid=True, traced=True)


def test_a_setting_declared_here_is_checked_without_a_line_of_its_own():
    """The checks read the declarations: a configuration declared like `SWANConfig`
    refuses what its `setting(...)`s refuse, in the library's words."""
    from swan_jax.settings import check_keywords

    @dataclasses.dataclass(frozen=True)
    class Field:
        delta: float = setting(0.5, low=0, high=1, grid=True, traced=True, help="h")
        steps: int = setting(2, low=1, help="h")
        kind: str = setting("x", choices=("x", "y"), help="h")

        def __post_init__(self):
            check_keywords(self)

    assert Field(delta=jnp.ones(3)).steps == 2  # a traced value is not read
    for kwargs, line in [({"delta": 2.0}, "delta must be in [0, 1], got 2.0"),
                         ({"delta": "a"}, "delta must be a number, got 'a'"),
                         ({"steps": 0}, "steps must be an integer >= 1, got 0"),
                         ({"kind": "z"}, "unknown kind 'z'; valid kinds: x, y")]:
        with pytest.raises(ValueError) as err:
            Field(**kwargs)
        assert str(err.value) == line
    with pytest.raises(ValueError, match=r"^beta must be a number, got 'x'$"):
        sj.SWANConfig(beta="x")
    with pytest.raises(ValueError, match=r"^weight_sharing must be true or false, got 1$"):
        sj.SWANConfig(weight_sharing=1)


class Recording(Mapping):
    """A grid point that notes which keys are read (as `train`'s check does)."""

    def __init__(self, values):
        self.values, self.read = dict(values), set()

    def __getitem__(self, key):
        self.read.add(key)
        return self.values[key]

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)


def test_from_point_takes_the_points_swan_settings_and_the_fixed_ones():
    point = Recording({"epsilon": 0.5, "gamma": 0.2, "adjacency": "adj", "hidden": 64,
                       "learning_rate": 1e-3})
    cfg = sj.SWANConfig.from_point(point, variant="swan-learn", num_layers=4)
    assert cfg == sj.SWANConfig(variant="swan-learn", adjacency="adj", gamma=0.2,
                                epsilon=0.5, num_layers=4)
    assert point.read & set(point.values) == {"epsilon", "gamma", "adjacency"}
    # a code, as a run carries it: held by its name when known
    assert sj.SWANConfig.from_point({"adjacency": np.float32(0.0)}).adjacency == "adj"
    with pytest.raises(ValueError, match=r"^num_layers is given twice: by the grid point "):
        sj.SWANConfig.from_point({"num_layers": 3}, num_layers=4)
    with pytest.raises(ValueError, match=r"^epsilon must be > 0, got -1\.0$"):
        sj.SWANConfig.from_point({"epsilon": -1.0})
    with pytest.raises(ValueError, match="cannot be traced: it must be one of sym, adj"):
        traced_value("adjacency", "lap")


def test_at_most_one_swan_config_call_under_the_experiments():
    """The experiments build SWAN's block through the sweep's one bridge
    (`Experiment.swan_block` -> `SWANConfig.from_point`), never field by field."""
    calls = {path.name: len(re.findall(r"\bSWANConfig\(", path.read_text()))
             for path in EXPERIMENTS.rglob("*.py")}
    assert sum(calls.values()) <= 1, {k: v for k, v in calls.items() if v}
    for name in ("transfer", "graphprop", "lrgb", "node_classification"):
        source = (EXPERIMENTS / f"{name}.py").read_text()
        assert "swan_block(" in source and "SWANConfig" not in source, name


def test_train_optim_knows_nothing_of_swan():
    tree = ast.parse((ROOT / "swan_jax" / "train" / "_optim.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "swan_jax.config" not in imported
    assert "SWANConfig" not in ast.unparse(tree)


def _first_swan(exp, cfg):
    """The first program's grid point (static values beside) and its model."""
    program = exp.plan(cfg)[0]
    hp = config.concrete_hparams(program.grid[0])
    return program, {**program.static, **hp}, exp.model_fn(cfg, program.cell,
                                                            program.static)(hp)


def _of(point, *names):
    return {k: point[k] for k in names}


def test_every_experiment_builds_the_swan_config_of_its_grid_point():
    """Each experiment's model holds the SWANConfig of its program's grid point and the
    cell's fixed settings, integrated as its configuration says."""
    from swan_jax.experiments import graphprop, lrgb, node_classification, transfer

    numbers = ("beta", "gamma", "epsilon")
    cfg = transfer.parse_config(["--topology", "ring", "--distance", "3", "--model",
                                 "swan-learn", "--solver", "heun", "--adjacency", "sym,adj"])
    program, point, model = _first_swan(transfer.EXPERIMENT, cfg)
    assert "adjacency" not in program.static  # traced: both A_hat in one program
    assert model.processor.cfg == sj.SWANConfig(variant="swan-learn", num_layers=3,
                                                **_of(point, "adjacency", *numbers))
    assert model.processor.solver == "heun"
    # settings off their defaults, so that a value not taken from the point shows
    moved = ["--layers", "3", "--adjacency", "adj", "--epsilon", "0.5", "--gamma", "0.3"]
    cfg = graphprop.parse_config(["--task", "sssp", "--models", "swan-ld", *moved])
    program, point, model = _first_swan(graphprop.EXPERIMENT, cfg)
    assert model.processor.cfg == sj.SWANConfig(
        variant="swan", weight_sharing=False, **_of(point, "adjacency", "num_layers",
                                                     *numbers))
    assert (point["num_layers"], point["adjacency"], point["epsilon"]) == (3, "adj", 0.5)
    for exp, argv, key in [(lrgb, ["--dataset", "peptides-func", "--variant", "swan-ne"],
                            "variant"),
                           (node_classification, ["--models", "swan"], "model")]:
        argv = [*argv, *moved]
        program, point, model = _first_swan(exp.EXPERIMENT, exp.parse_config(argv))
        assert model.processor.cfg == sj.SWANConfig(
            variant=program.cell[key], **_of(point, "adjacency", "num_layers", *numbers))
        assert (point["num_layers"], point["adjacency"]) == (3, "adj")


def test_the_integrators_defaults_are_written_once():
    """`solve`'s keywords and both blocks' settings default to `IntegratorConfig()`'s."""
    import inspect

    from swan_jax.models import nnx as swan_nnx

    defaults = sj.IntegratorConfig().options()
    keywords = inspect.signature(sj.solve).parameters
    assert {k: keywords[k].default for k in defaults} == defaults
    block = sj.SWANBlock(sj.SWANConfig())
    assert {k: getattr(block, k) for k in defaults} == defaults
    nnx_keywords = inspect.signature(swan_nnx.SWANBlock.__init__).parameters
    assert {k: nnx_keywords[k].default for k in defaults} == defaults


def test_the_adjacency_reaches_the_graph_operations_in_one_form():
    """Every way in (a name through the Python API, a program's static name, a described
    run's concrete code, a code) reaches the graph operations as one known code: one
    program, which computes only the operator it selects; a traced code (runs of both
    adjacencies in one program) computes both and selects each run's bit for bit."""
    from tests.graphs import random_undirected

    graph = random_undirected(np.random.default_rng(5), 6, isolated=1)
    x0 = jnp.ones((6, 2))
    base = sj.SWANConfig(num_layers=2)

    def jaxpr(cfg):
        return str(jax.make_jaxpr(lambda x: sj.field.build_operators({}, graph, x, cfg))(x0))

    programs = {}
    for name, code in config.ADJACENCY_CODES.items():
        ways = [base.replace(adjacency=name), base.replace(adjacency=code),
                sj.SWANConfig.from_point({"adjacency": name}, num_layers=2),
                sj.SWANConfig.from_point(config.concrete_hparams({"adjacency": name}),
                                         num_layers=2)]
        assert {(w.adjacency, w.adjacency_code) for w in ways} == {(name, code)}
        assert all(type(w.adjacency_code) is float for w in ways)  # known: static
        assert len({jaxpr(w) for w in ways}) == 1, name
        programs[name] = jaxpr(ways[0])
    codes = jnp.asarray(list(config.ADJACENCY_CODES.values()))
    traced = str(jax.make_jaxpr(jax.vmap(lambda c: sj.field.build_operators(
        {}, graph, x0, base.replace(adjacency=c))))(codes))
    # adj known computes no D^-1/2; sym known no selection; traced both and a selection
    assert programs["adj"].count("pow") < programs["sym"].count("pow") == traced.count("pow")
    assert programs["sym"].count("select_n") < traced.count("select_n")
    batched = jax.vmap(lambda c: sj.field.build_operators({}, graph, x0,
                                                          base.replace(adjacency=c)))(codes)
    for i, name in enumerate(config.ADJACENCY_CODES):
        known = sj.field.build_operators({}, graph, x0, base.replace(adjacency=name))
        for a, b in zip(jax.tree_util.tree_leaves(batched), jax.tree_util.tree_leaves(known),
                        strict=True):
            assert np.array_equal(np.asarray(a)[i], np.asarray(b)), name
    # below the configuration there is no name: one line saying what to pass
    with pytest.raises(ValueError, match=r"^the graph operations take the adjacency's code"):
        sj.graph.edge_operators(graph, 6, "sym")
    with pytest.raises(ValueError, match=r"^an adjacency code must be 1 \(sym\) or 0 \(adj\)"):
        sj.graph.edge_operators(graph, 6, 0.5)
