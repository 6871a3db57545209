"""The experiments' command lines refuse bad flags before any data is loaded or trained.

Argparse errors exit with status 2 and print `error: ...` to stderr, naming the valid
choices; an existing results file is kept unless `--overwrite` (or `--resume`) is given;
the LRGB model is held to 500k parameters unless `--allow-more-params`.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from swan_jax.config import VARIANTS
from swan_jax.experiments import sweep
from swan_jax.solvers import SOLVERS

MODULES = ("graphprop", "lrgb", "transfer")
# A valid command line of each experiment, which the cases below add one bad flag to.
VALID = {"transfer": ["--topology", "ring", "--distance", "3", "--model", "swan"],
         "graphprop": ["--task", "sssp"], "lrgb": ["--dataset", "peptides-func"]}


def experiment(name: str):
    return importlib.import_module(f"swan_jax.experiments.{name}")


def parse(name: str, argv: list[str]):
    """What each experiment's `main` does with its argv before any work."""
    return experiment(name).parse_config(argv)


def refused(name: str, argv: list[str], capsys) -> str:
    """Parse `argv`, expect argparse's exit 2, return the error line it printed."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        parse(name, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ")
    return err.strip().splitlines()[-1]


SOLVER_LIST = r"\(choose from " + ", ".join(f"'{s}'" for s in SOLVERS) + r"\)"
VARIANT_LIST = "valid: " + ", ".join(VARIANTS)

UNKNOWN_NAMES = [
    ("transfer", ["--model", "swan,gin2"], r"argument --model/--models: unknown 'gin2'; valid: "
                                           r"swan, swan-learn, .*, gcn, gin, sage, gat, gps, "
                                           r"graphgps$"),
    ("transfer", ["--variant", "swan-xl"], rf"argument --variant: unknown 'swan-xl'; "
                                           rf"{VARIANT_LIST}$"),
    ("transfer", ["--topology", "torus"], r"argument --topology/--topologies: unknown 'torus'; "
                                          r"valid: line, ring, crossed-ring$"),
    ("transfer", ["--solver", "rk4"], rf"argument --solver: invalid choice: 'rk4' {SOLVER_LIST}"),
    ("transfer", ["--adjoint", "magic"], r"argument --adjoint: invalid choice: 'magic' \(choose "
                                         r"from 'recursive', 'backsolve', 'direct'\)"),
    ("transfer", ["--adjacency", "lap"], r"argument --adjacency: unknown 'lap'; valid: sym, adj$"),
    ("graphprop", ["--task", "girth"], r"argument --task: unknown 'girth'; valid: diameter, sssp, "
                                       r"eccentricity$"),
    ("graphprop", ["--models", "swan-ld,gine"], r"argument --models: unknown 'gine'; valid: "
                                                r"swan, swan-learn, swan-ld, .*, adgn, gcn, gin, "
                                                r"sage, gat, graphcon$"),
    ("graphprop", ["--variant", "gcn"], rf"argument --variant: unknown 'gcn'; {VARIANT_LIST}$"),
    ("graphprop", ["--labels", "ogb"], r"argument --labels: unknown 'ogb'; valid: "
                                              r"paper, faithful, swan-code$"),
    ("graphprop", ["--solver", "euler2"], rf"argument --solver: invalid choice: 'euler2' "
                                          rf"{SOLVER_LIST}"),
    ("lrgb", ["--dataset", "zinc"], r"argument --dataset: unknown 'zinc'; valid: peptides-func, "
                                    r"peptides-struct, pascalvoc-sp$"),
    ("lrgb", ["--variant", "gcn"], rf"argument --variant: unknown 'gcn'; {VARIANT_LIST}$"),
    ("lrgb", ["--grid", "huge"], r"argument --grid: invalid choice: 'huge' \(choose from "
                                 r"'paper', 'full'\)"),
    ("lrgb", ["--solver", "rk4"], rf"argument --solver: invalid choice: 'rk4' {SOLVER_LIST}"),
    ("transfer", ["--model", ","], r"argument --model/--models: expected at least one name, got "
                                   r"an empty list; valid: swan, "),
]


@pytest.mark.parametrize("name,argv,message", UNKNOWN_NAMES,
                         ids=[f"{n}{' '.join(a)}" for n, a, _ in UNKNOWN_NAMES])
def test_unknown_names_are_refused_listing_the_valid_ones(name, argv, message, capsys):
    line = refused(name, VALID[name] + argv, capsys)
    assert re.search(message, line), line


BAD_NUMBERS = [
    ("transfer", ["--epsilon", "0"], r"argument --epsilon: every value must be > 0, got 0 in '0'"),
    ("graphprop", ["--epsilon", "0.1,-0.5"], r"argument --epsilon: every value must be > 0, got "
                                             r"-0\.5 in '0\.1,-0\.5'"),
    ("lrgb", ["--epsilon", "nan"], r"argument --epsilon: expected finite numbers, got nan"),
    ("lrgb", ["--lr", "0"], r"argument --lr: every value must be > 0, got 0"),
    ("graphprop", ["--layers", "0"], r"argument --layers: every value must be >= 1, got 0"),
    ("lrgb", ["--layers", "5,0"], r"argument --layers: every value must be >= 1, got 0 in '5,0'"),
    ("transfer", ["--distance", "3,-1"], r"argument --distance/--distances: every value must be "
                                         r">= 1, got -1"),
    ("graphprop", ["--hidden", "0"], r"argument --hidden: every value must be >= 1, got 0"),
    ("lrgb", ["--hidden", "0"], r"argument --hidden: every value must be >= 1, got 0"),
    ("transfer", ["--hidden", "0"], r"argument --hidden: must be >= 1, got 0"),
    ("transfer", ["--epochs", "0"], r"argument --epochs: must be >= 1, got 0"),
    ("lrgb", ["--weight-decay", "-0.001"], r"argument --weight-decay: every value must be >= 0, "
                                           r"got -0\.001"),
    ("transfer", ["--rtol", "-1"], r"argument --rtol: must be a finite number > 0, got -1"),
    ("transfer", ["--beta", "inf"], r"argument --beta: expected finite numbers, got inf"),
    ("graphprop", ["--per-size", "6,3"], r"error: --per-size takes three numbers: train,val,test "
                                         r"\(got 2\)"),
    ("graphprop", ["--models", "swan", "--variant", "swan"], r"error: give either --models or "
                                                             r"--variant"),
    ("graphprop", ["--variant", "adgn", "--layer-dependent"], r"--layer-dependent is available "
                                                              r"for swan, swan-learn; not "
                                                              r"\['adgn-ld'\]"),
]


@pytest.mark.parametrize("name,argv,message", BAD_NUMBERS,
                         ids=[f"{n}{' '.join(a)}" for n, a, _ in BAD_NUMBERS])
def test_out_of_range_numbers_are_refused(name, argv, message, capsys):
    line = refused(name, VALID[name] + argv, capsys)
    assert re.search(message, line), line


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("seeds,message", [
    ("", r"argument --seeds: expected at least one value, got an empty list"),
    (",", r"argument --seeds: expected at least one value, got an empty list"),
    (" , ,", r"argument --seeds: expected at least one value, got an empty list"),
    ("0,1,0", r"argument --seeds: seeds must be distinct, 0 is repeated in '0,1,0'"),
    ("0,one", r"argument --seeds: expected comma-separated integers, got '0,one'"),
])
def test_empty_repeated_or_malformed_seed_lists_are_refused(name, seeds, message, capsys):
    line = refused(name, VALID[name] + ["--seeds", seeds], capsys)
    assert re.search(message, line), line


@pytest.mark.parametrize("name,argv,message", [
    ("transfer", ["--topology", "ring"], r"error: give --topology, --distance and --model"),
    ("lrgb", [], r"error: name a --dataset or pass --all"),
])
def test_an_incomplete_command_line_says_what_is_missing(name, argv, message, capsys):
    assert re.search(message, refused(name, argv, capsys))


def test_valid_command_lines_still_parse():
    # The guards above refuse only what is wrong: the boundary values pass.
    cfg = parse("transfer", VALID["transfer"] + ["--epsilon", "1e-9", "--seeds", "7",
                                                 "--distance", "1"])
    assert cfg.grid["epsilon"] == (1e-9,) and cfg.seeds == (7,) and cfg.distances == (1,)
    args = parse("lrgb", VALID["lrgb"] + ["--weight-decay", "0", "--layers", "1"])
    assert args.grid["weight_decay"] == (0.0,) and args.grid["num_layers"] == (1,)
    gp = parse("graphprop", ["--variant", "swan", "--layer-dependent", "--per-size", "1,1,1"])
    assert gp.models == ("swan-ld",) and gp.per_size == (1, 1, 1)


# --- results files ----------------------------------------------------------------


class Reached(Exception):
    """Raised by a stand-in for the first step after the results-file check."""


def results_argv(name: str, results: Path) -> list[str]:
    return VALID[name] + ["--results-dir", str(results), "--no-progress"]


@pytest.mark.parametrize("name", MODULES)
def test_an_existing_results_file_is_kept_without_overwrite(name, tmp_path, monkeypatch):
    module = experiment(name)
    path = tmp_path / "results.json"
    payload = json.dumps({"records": [{"keep": "me"}]})
    path.write_text(payload)

    def reached(*args, **kwargs):
        raise Reached

    # The first step after the results file is opened (the data check); nothing may get
    # that far.
    monkeypatch.setattr(type(module.EXPERIMENT), "missing_data", reached)
    # Every experiment exits with the message (no traceback).
    with pytest.raises(SystemExit) as err:
        module.main(results_argv(name, tmp_path))
    assert re.search(rf"{re.escape(str(path))} exists; pass --resume .* or --overwrite",
                     str(err.value))
    assert path.read_text() == payload
    # --overwrite (and --resume) get past the check; the file is only replaced once a
    # cell finishes.
    for flag in ("--overwrite", "--resume"):
        with pytest.raises(Reached):
            module.main(results_argv(name, tmp_path) + [flag])
        assert path.read_text() == payload


# --- the LRGB parameter budget ----------------------------------------------------


def test_lrgb_refuses_a_model_over_500k_parameters_unless_allowed(tmp_path, monkeypatch, capsys):
    from tests.test_lrgb_experiment import write_peptides

    lrgb = experiment("lrgb")
    data = write_peptides(tmp_path / "data")
    argv = ["--dataset", "peptides-func", "--variant", "swan", "--hidden", "512", "--layers",
            "2", "--epochs", "1", "--seeds", "0", "--batch-size", "4", "--data-dir", str(data),
            "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "res"),
            "--checkpoint-dir", str(tmp_path / "ck"), "--no-verify-md5", "--no-download",
            "--no-progress"]
    with pytest.raises(SystemExit) as err:
        lrgb.main(argv)
    assert re.fullmatch(r"peptides-func / swan \{.*'hidden': 512.*\}: [\d,]+ parameters exceed "
                        r"LRGB's budget of 500,000; lower --hidden or --layers, or pass "
                        r"--allow-more-params", str(err.value))
    assert not (tmp_path / "res" / "results.json").exists()
    # The flag lifts the budget all the way into the training loop.
    seen = []

    def fake_train(model_fn, splits, cfg, grid, **kwargs):
        seen.append((cfg.allow_more_params, cfg.max_params))
        raise Reached

    monkeypatch.setattr(sweep, "train", fake_train)
    with pytest.raises(Reached):
        lrgb.main(argv + ["--allow-more-params"])
    assert seen == [(True, 500_000)]


# --- the commands a user types ------------------------------------------------------


@pytest.mark.parametrize("name", (*MODULES, "node_classification"))
def test_the_script_and_the_module_are_the_same_command(name, monkeypatch, capsys):
    """`python experiments/<name>.py --help` (a process of its own: the script's sys.path)
    prints what `python -m swan_jax.experiments.<name> --help` does; the module is run
    the way `-m` runs it (`runpy`, as `__main__`), in this process: one interpreter
    start-up less per experiment."""
    import runpy
    import subprocess
    import sys
    import warnings

    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps to the terminal's width
    done = subprocess.run([sys.executable, f"experiments/{name}.py", "--help"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr(sys, "argv", [f"swan_jax.experiments.{name}", "--help"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: "found in sys.modules"
        runpy.run_module(f"swan_jax.experiments.{name}", run_name="__main__")
    assert exit_info.value.code in (0, None)
    script, module = (out.split("\n", 1)[1] for out in (done.stdout, capsys.readouterr().out))
    assert script == module  # after "usage: <prog>"
    assert "--config CONFIG" in script
    assert name != "node_classification" or "--splits SPLITS" in script
