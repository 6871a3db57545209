"""Every setting is declared once and checked one way, whatever its source.

A setting is a dataclass field with its help, type, range or choices and role
(`swan_jax.settings`); the experiments' flags are generated from those declarations
(`swan_jax.experiments.flags`), and TOML scalars, TOML `[grid]` lists, flags and defaults
go through the same check: a refusal is one line and exit 2 before any work, and an
accepted file resolves to exactly what it asked for (`--dry-run` prints the resolved
configuration and stops). Issue 21 (settings declared once) and issue 23 (one validation
path; --all with --dataset, --resume with --overwrite, diverged runs).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from swan_jax.experiments import command, flags, sweep
from swan_jax.experiments.config import (
    CONFIG_DIR,
    SweepConfig,
    axes_of,
    dump_toml,
    load_toml,
    schema,
)
from swan_jax.settings import NONE, SettingError, kind_of
from swan_jax.solvers import IntegratorConfig
from swan_jax.train import TrainConfig

NAMES = ("lrgb", "transfer", "graphprop", "node_classification")
VALID = {"transfer": ["--topology", "ring", "--distance", "3", "--model", "swan"],
         "graphprop": ["--task", "sssp"], "lrgb": ["--dataset", "peptides-func"],
         "node_classification": []}


def module(name: str):
    return importlib.import_module(f"swan_jax.experiments.{name}")


def run(name: str, argv: list[str], capsys) -> tuple[int, str, str]:
    """`main` in-process: (exit status, stdout, stderr); a traceback fails the test."""
    capsys.readouterr()
    said = ""
    try:
        status = module(name).main(argv)
    except SystemExit as err:
        status = err.code if isinstance(err.code, int) else 1
        said = err.code if isinstance(err.code, str) else ""  # what the exit prints
    out, err = capsys.readouterr()
    return status, out, err + said


def refusal(err: str) -> str:
    """The one error line of a refusal (argparse: a usage line, then the error)."""
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 2 and lines[0].startswith("usage: "), err
    return lines[1]


# --------------------------------------------------------------------- declarations


@pytest.mark.parametrize("name", NAMES)
def test_every_setting_has_one_declaration_help_and_one_flag(name):
    exp = module(name).EXPERIMENT
    entries = schema(exp.Config)
    assert {"epochs", "seeds", "solver", "max_steps", "plateau_threshold", "min_lr_scale",
            "results_dir"} <= set(entries)  # nested settings keep their flat names
    for entry in [*entries.values(), *axes_of(exp.Config).values()]:
        assert entry.spec.help.strip(), entry.name
    parser = command.build_parser(exp)
    options = [o for a in parser._actions for o in a.option_strings]
    assert len(options) == len(set(options))  # no flag twice
    for action in parser._actions:
        assert action.help and action.help.strip(), action.option_strings
    names = flags.flag_names(exp.Config)
    for entry in entries.values():
        if kind_of(entry.hint).item is not Any and entry.name not in ("grid", "data_options"):
            if entry.name == "allow_more_params" and exp.max_params is None:
                continue
            assert names[entry.name] in options, entry.name
    assert parser.prog == f"swan-{name.replace('_', '-')}"
    assert parser.format_usage().startswith(f"usage: swan-{name.replace('_', '-')} ")


def test_training_and_integrator_settings_nest_instead_of_being_copied():
    cfg = SweepConfig(epochs=3, max_steps=50, results_dir="r")  # flat names route
    assert cfg.train == TrainConfig(epochs=3) and cfg.integrator == IntegratorConfig(
        max_steps=50)
    assert (cfg.epochs, cfg.max_steps, cfg.results_dir) == (3, 50, Path("r"))
    assert dataclasses.replace(cfg, patience=4).train.patience == 4
    with pytest.raises(SettingError, match=r"^epochs must be >= 1, got 0$"):
        SweepConfig(epochs=0)
    # The sweep's TrainConfig is the nested one, with what it decides per program.
    from swan_jax.experiments import transfer

    cfg = transfer.parse_config([*VALID["transfer"], "--plateau-threshold", "0.01",
                                 "--min-lr-scale", "0.1", "--max-steps", "64",
                                 "--solver", "tsit5", "--no-check-memory"])
    [program, *_] = transfer.EXPERIMENT.plan(cfg)
    tc = sweep.train_config(transfer.EXPERIMENT, cfg, program, None)
    assert (tc.plateau_threshold, tc.min_lr_scale, tc.check_memory) == (0.01, 0.1, False)
    assert dataclasses.replace(tc, loss="mse", metric="mse", checkpoint_dir=None,
                               description="train", on_divergence="raise") == cfg.train
    hp = {"epsilon": 0.5, "gamma": 0.1, "beta": 1.0, "adjacency": 1.0}  # as a program's
    block = transfer.EXPERIMENT.model_fn(cfg, program.cell, program.static)(hp).processor
    assert (block.solver, block.max_steps) == ("tsit5", 64)


def test_new_settings_keep_the_names_of_existing_program_folders():
    """Folders are named by a hash of the "train" settings; settings added here enter it
    only when changed, so runs started before resume into the same folders."""
    from swan_jax.experiments import graphprop, lrgb

    idents = [p.ident for p in lrgb.EXPERIMENT.plan(lrgb.parse_config(["--all"]))]
    assert idents == ["700433ecf3", "1c14b83717", "ed937fa8ba", "7fcbbec202", "ab06a8334e",
                      "9886d3e9d8"]
    cpu = graphprop.parse_config(["--config", str(CONFIG_DIR / "graphprop-cpu.toml")])
    assert [p.ident for p in graphprop.EXPERIMENT.plan(cpu)][:3] == [
        "408b23255d", "3583de4ccf", "74fe11b859"]
    changed = lrgb.parse_config(["--all", "--max-steps", "100"])
    assert lrgb.EXPERIMENT.plan(changed)[0].ident not in idents


# --------------------------------------------------------------- one check, any source


SAME_PROBLEM = [  # (setting, TOML text, flag argv, the problem both report)
    ("epochs", "epochs = 0", ["--epochs", "0"], "must be >= 1, got 0"),
    ("batch_size", "batch_size = 0", ["--batch-size", "0"], "must be >= 1, got 0"),
    ("rtol", "rtol = -1", ["--rtol", "-1"], "must be a finite number > 0, got -1"),
    ("plateau_factor", "plateau_factor = 1.5", ["--plateau-factor", "1.5"],
     "must be a finite number in (0, 1), got 1.5"),
    ("learning_rate", "[grid]\nlearning_rate = [-1.0]", ["--lr", "-1"],
     "every value must be > 0, got -1"),
    ("adjacency", '[grid]\nadjacency = ["lap"]', ["--adjacency", "lap"],
     "unknown 'lap'; valid: sym, adj"),
    ("epsilon", "[grid]\nepsilon = [nan]", ["--epsilon", "nan"],
     "expected finite numbers, got nan"),
    ("solver", 'solver = "rk4"', ["--solver", "rk4"], "invalid choice: 'rk4' (choose from "
                                                      "'euler', 'heun', 'midpoint'"),
]


@pytest.mark.parametrize("setting,toml,argv,problem", SAME_PROBLEM,
                         ids=[s[0] for s in SAME_PROBLEM])
def test_a_toml_value_and_a_flag_are_refused_with_the_same_words(setting, toml, argv, problem,
                                                                 tmp_path, capsys):
    path = tmp_path / "run.toml"
    path.write_text(toml + "\n")
    status, _, err = run("lrgb", ["--all", "--config", str(path), "--dry-run"], capsys)
    assert status == 2 and problem in refusal(err) and str(path) in refusal(err)
    status, _, err = run("lrgb", ["--all", *argv, "--dry-run"], capsys)
    assert status == 2 and problem in refusal(err)


@pytest.mark.parametrize("toml,message", [
    ("learning_rat = [0.5]", r"unknown setting\(s\) learning_rat; valid: grid, seeds, .*did "
                             r"you mean 'learning_rate'"),
    ("[grid]\nlearning_rat = [0.5]", r"unknown grid axis \(axes\) learning_rat; valid: "
                                     r"learning_rate, .*did you mean 'learning_rate'"),
    ('epochs = "three"', r"epochs must be an integer, got 'three'$"),
    ("epochs = 1.5", r"epochs must be an integer, got 1\.5$"),
    ("seeds = [0, 0]", r"seeds must be distinct, 0 is repeated$"),
    ('experiment = "transfer"', r"experiment is 'transfer', but this command runs 'lrgb': "
                                r"run it with swan-transfer --config"),
    ("epochs = 5\nwarmup_epochs = 9", r"warmup_epochs must be in \[0, epochs\), got 9$"),
    ('optimizer = "sgd"', r"optimizer: invalid choice: 'sgd' \(choose from 'adam', "
                          r"'adamw'\)$"),
    ("grid = 3", r"grid must be a table of axes, got 3$"),
    ("patience = true", r"patience must be an integer, got True$"),
])
def test_toml_mistakes_are_one_line_before_any_work(toml, message, tmp_path, capsys):
    path = tmp_path / "run.toml"
    path.write_text(toml + "\n")
    status, out, err = run("lrgb", ["--all", "--config", str(path)], capsys)
    assert status == 2 and out == "" and re.search(message, refusal(err)), err


def test_contradicting_or_narrowing_flags(capsys):
    from swan_jax.experiments import lrgb

    status, _, err = run("transfer", [*VALID["transfer"], "--resume", "--overwrite"], capsys)
    assert status == 2 and refusal(err).endswith(
        "error: --overwrite cannot be combined with resume: resume continues the checkpoints "
        "that overwrite deletes; give one of them")
    # --all is narrowed by --dataset, as --all is by --topology / --task elsewhere.
    assert lrgb.parse_config(["--all", "--dataset", "peptides-struct"]).datasets == (
        "peptides-struct",)
    assert lrgb.parse_config(["--all"]).datasets == ("peptides-func", "peptides-struct",
                                                     "pascalvoc-sp")
    # A shortcut flag whose name is a setting's (`--grid`, the grid file) is not a setting.
    full = lrgb.parse_config(["--all", "--grid", "full", "--lr", "0.5"])
    assert full.grid_name == "full" and full.grid["learning_rate"] == (0.5,)
    assert full.grid["num_layers"] == (5, 8, 16, 32)


def test_dry_run_prints_the_resolved_configuration_and_writes_nothing(tmp_path, capsys):
    argv = [*VALID["transfer"], "--results-dir", str(tmp_path / "res"), "--lr", "0.1,0.2",
            "--max-steps", "9", "--dry-run"]
    status, out, _ = run("transfer", argv, capsys)
    assert status == 0 and not (tmp_path / "res").exists()
    assert "# plan: 1 program(s), 32 run(s) of up to 2000 epoch(s)" in out  # both A_hat
    resolved = tomllib.loads(out)
    assert resolved["grid"]["learning_rate"] == [0.1, 0.2] and resolved["max_steps"] == 9
    path = tmp_path / "config.toml"
    path.write_text(out)
    from swan_jax.experiments import transfer

    cfg = transfer.parse_config(argv)
    assert load_toml(transfer.TransferConfig, path, experiment="transfer") == cfg
    assert dump_toml(cfg, "transfer").startswith(
        "# swan-jax transfer: the resolved configuration of the last run here.\n"
        "# Rerun it: swan-transfer --config <this file>\n")


def test_diverged_runs_are_reported_on_stderr_and_in_the_exit_status(capsys):
    from swan_jax.experiments import transfer

    exp = transfer.EXPERIMENT
    cells = [{"topology": "ring", "distance": 3, "model": "swan", "diverged": [True, False],
              "best_hparams": {"learning_rate": 1e9}},
             {"topology": "line", "distance": 3, "model": "swan", "diverged": [False],
              "best_hparams": {}}]
    cfg = transfer.parse_config(VALID["transfer"])
    assert command.report_divergence(exp, cfg, cells) == command.EXIT_DIVERGED
    err = capsys.readouterr().err
    assert err.splitlines()[0] == ("diverged: ring / 3 / swan: 1 of 2 run(s) at "
                                   "{'learning_rate': 1000000000.0} went non-finite; lower "
                                   "--lr, or change the grid")
    assert "pass --allow-diverged to exit 0" in err
    allowed = transfer.parse_config([*VALID["transfer"], "--allow-diverged"])
    assert command.report_divergence(exp, allowed, cells) == 0
    assert command.report_divergence(exp, cfg, cells[1:]) == 0


def test_a_data_error_names_the_flag_of_the_setting_it_carries():
    from swan_jax.data.errors import SKIP_BAD_ROWS, DataFormatError
    from swan_jax.experiments import lrgb
    from swan_jax.experiments import node_classification as nce

    err = DataFormatError("x.csv: row 2: bad", hint=SKIP_BAD_ROWS)
    assert command.data_error_message(lrgb.EXPERIMENT, err) == (
        "LRGB data error: x.csv: row 2: bad (pass --skip-bad-rows to skip such rows)")
    # No such setting in node classification: the loader's words stay, no hint is added.
    assert "--skip-bad-rows to skip" not in command.data_error_message(nce.EXPERIMENT, err)
    assert command.data_error_message(lrgb.EXPERIMENT, ValueError("not data")) is None


# ----------------------------------------------------------- the property: any mutation


def _typo(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from([name[:-1], name + "s", name.replace("_", ""), name.upper(),
                            name[1:] or "x"]).filter(lambda k: k != name)


CELLS = {"transfer": {"topologies": ["ring"], "distances": [3], "models": ["swan"]},
         "lrgb": {"datasets": ["peptides-func"]}, "graphprop": {}, "node_classification": {}}


@functools.cache
def space(name: str) -> tuple[dict, list[str], dict]:
    """(settings, the TOML keys mutated, grid axes) of an experiment's configuration."""
    entries = schema(module(name).EXPERIMENT.Config)
    keys = sorted(k for k, e in entries.items() if kind_of(e.hint).item is not Any
                  and k not in ("resume", "overwrite", "results_dir"))  # flags set these
    return entries, keys, axes_of(module(name).EXPERIMENT.Config)


VALUES = st.one_of(
    st.integers(-3, 5), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["none", "three", "", "sym", "adam", "euler", "tsit5", "ring", "paper",
                     "torch", "swan", "/tmp/swan-x"]),
    st.booleans(),
    st.lists(st.one_of(st.integers(-1, 4), st.floats(-2, 2), st.sampled_from(
        ["ring", "line", "swan", "gcn", "sym", "adj", "lap"])), max_size=3))


def _valid(entry, many: bool | None = None) -> st.SearchStrategy:
    """Values the declaration accepts (so that about half the documents resolve)."""
    spec, kind = entry.spec, kind_of(entry.hint)
    many = kind.many if many is None else many
    if spec.choices:
        item = st.sampled_from(spec.choices)
    elif kind.item is bool:
        item = st.booleans()
    elif kind.item is int:
        item = st.integers(int(spec.low or 0) + (1 if spec.low_open else 0), 6)
    elif kind.item is float:
        low = spec.low if spec.low is not None else -3.0
        item = st.floats(low, spec.high if spec.high is not None else 3.0,
                         exclude_min=spec.low_open or spec.low is None,
                         exclude_max=spec.high_open or spec.high is None)
    else:
        item = st.sampled_from(["cache-x", "data-x"])
    if not many:
        return item
    if kind.length:
        return st.lists(item, min_size=kind.length, max_size=kind.length)
    return st.lists(item, min_size=1, max_size=3, unique=spec.distinct)


HOW = ("valid", "valid", "valid", "valid", "any", "typo")  # of each key: its value, or name


@st.composite
def mutations(draw, name: str) -> dict:
    """A TOML document: a few top-level keys and grid axes, sometimes misspelt, with valid
    values or any values (wrong types, out of range, NaN, empty lists)."""
    entries, keys, axes = space(name)
    doc: dict = {}
    for _ in range(draw(st.integers(1, 3))):
        key, how = draw(st.sampled_from(keys)), draw(st.sampled_from(HOW))
        value = draw(_valid(entries[key]) if how != "any" else VALUES)
        doc[draw(_typo(key)) if how == "typo" else key] = value
    grid = {}
    for _ in range(draw(st.integers(0, 2))):
        axis, how = draw(st.sampled_from(sorted(axes))), draw(st.sampled_from(HOW))
        value = draw(_valid(axes[axis], many=True) if how != "any"
                     else st.one_of(VALUES, st.lists(VALUES, max_size=2)))
        grid[draw(_typo(axis)) if how == "typo" else axis] = value
    if grid:
        doc["grid"] = grid
    return doc


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") \
            if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _same(asked, got) -> bool:
    if asked == NONE or asked is None:
        return got == NONE
    if isinstance(asked, list):
        return isinstance(got, list) and len(asked) == len(got) and all(
            _same(a, g) for a, g in zip(asked, got, strict=True))
    if isinstance(asked, bool) or isinstance(got, bool):
        return asked is got
    if isinstance(asked, int | float) and isinstance(got, int | float):
        return float(asked) == float(got)
    return asked == got or str(Path(asked)) == got


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_toml_mutation_is_refused_in_one_line_or_resolves_to_what_it_asked(
        name, data, tmp_path_factory, capsys):
    doc = data.draw(mutations(name))
    folder = tmp_path_factory.mktemp("toml")
    path = folder / "run.toml"
    grid = doc.pop("grid", {})
    doc = {**CELLS[name], **doc}  # one cell unless a mutation changes it
    text = "\n".join(f"{k} = {_toml(v)}" for k, v in doc.items())
    text += "\n[grid]\n" + "\n".join(f"{k} = {_toml(v)}" for k, v in grid.items())
    path.write_text(text + "\n")
    argv = ["--config", str(path), "--results-dir", str(folder / "res"), "--dry-run"]
    status, out, err = run(name, argv, capsys)
    event("refused" if status else "accepted")
    if status == 1:  # the run's own check before data (issue 47: an implicit solver's
        assert out == "" and "\n" not in err.strip()  # batch size), one line, exit 1
        assert "Traceback" not in err and "implicit" in err, err
        return
    if status != 0:
        assert status == 2 and out == ""
        line = refusal(err)
        script = f"swan-{name.replace('_', '-')}"
        assert line.startswith(f"{script}: error: {path}: ") or "--" in line, line
        return
    assert err == "" and not (folder / "res").exists()
    resolved, axes = tomllib.loads(out), space(name)[2]
    for key, value in doc.items():
        axis = key in axes and key not in resolved
        got = resolved["grid"][key] if axis else resolved[key]
        asked = value if not axis or isinstance(value, list) else [value]
        assert _same(asked, got), (key, value, got)
    for axis, values in grid.items():
        asked = values if isinstance(values, list) else [values]
        assert _same(asked, resolved["grid"][axis]), (axis, values)
    written = folder / "config.toml"
    written.write_text(out)
    exp = module(name).EXPERIMENT
    assert load_toml(exp.Config, written) == module(name).parse_config(argv)


# NumPy's and matplotlib's warnings on a diverged run's NaN curves and inf scores reached
# the user's terminal (the summary's spread, the curves, the figure's legend)
@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.filterwarnings("error:No artists with labels:UserWarning")
def test_a_run_whose_reported_point_diverged_exits_3_unless_allowed(tmp_path, capsys):
    """`--lr 1e9` used to exit 0 with "(diverged runs)" only in the table; nothing else
    is said of it than the one line."""
    argv = ["--topology", "line", "--distance", "3", "--model", "swan", "--epochs", "2",
            "--train-size", "8", "--val-size", "4", "--test-size", "4", "--epsilon", "0.1",
            "--beta", "1", "--adjacency", "sym", "--seeds", "0", "--no-progress", "--lr",
            "1e9", "--results-dir", str(tmp_path / "res"), "--cache-dir",
            str(tmp_path / "cache")]
    status, out, err = run("transfer", argv, capsys)
    assert status == command.EXIT_DIVERGED and "(diverged runs)" in out
    assert re.search(r"^diverged: line / 3 / swan: 1 of 1 run\(s\) at \{.*'learning_rate': "
                     r"1000000000\.0\} went non-finite; lower --lr, or change the grid$", err,
                     re.M), err
    # Asked otherwise: the same results (resumed, nothing trains again) exit 0, still said.
    status, _, err = run("transfer", [*argv, "--resume", "--allow-diverged"], capsys)
    assert status == 0 and "diverged: line / 3 / swan" in err
