"""A new user's first contact and faults near the end of a run (issue 41).

`make reproduce-lrgb EPOCHS=1 SEEDS=0` with only Peptides-func present (Peptides-struct
and PascalVOC-SP absent, no network) trains what it has, says in one line per missing
data set what is missing and how to get it, marks those cells in `table.md`, and exits 0;
it fails only when nothing could run; `STRICT=1` keeps the refusal. The command line is
the one `make -n` builds from the Makefile, run here in this process (tiny sizes added).

An interrupt during the last checkpoint write or the final scoring is held until the
write is whole, then ends the run with exit 130 and the resume command, no epoch lost.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from swan_jax.data import GraphDataset
from swan_jax.experiments import command, lrgb, transfer
from swan_jax.experiments.config import to_dict
from swan_jax.train import ShapeMismatch, TrainingDiverged, train
from tests.test_lrgb_experiment import write_peptides
from tests.test_run_failures import TINY_TRANSFER, exits

ROOT = Path(__file__).resolve().parents[1]
MAKE_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
TINY = ["--variant", "swan", "--hidden", "8", "--layers", "2", "--batch-size", "4",
        "--no-verify-md5", "--no-progress"]


def make_command(target: str, data: Path, *settings: str) -> list[str]:
    """The arguments the Makefile passes to the experiment for `make target settings`
    (its recipe as `make -n` prints it, the install step taken as done)."""
    if shutil.which("make") is None:  # the Makefile's line is the subject: no make, no test
        pytest.fail("make is not installed")
    done = subprocess.run(["make", "-n", "-o", "install", target, f"PY={sys.executable}",
                           f"SWAN_DATA_DIR={data}", *settings], cwd=ROOT, capture_output=True,
                          text=True, env=MAKE_ENV, check=True)
    [line] = done.stdout.strip().splitlines()
    words = shlex.split(line)
    assert words[:2] == [sys.executable, "experiments/lrgb.py"], line
    return words[2:]


def test_make_reproduce_lrgb_trains_the_data_it_has_and_marks_the_rest(tmp_path, capsys):
    data = write_peptides(tmp_path / "data")  # Peptides-func only
    argv = make_command("reproduce-lrgb", data, "EPOCHS=1", "SEEDS=0")
    assert argv == ["--all", "--data-dir", str(data), "--epochs", "1", "--seeds", "0",
                    "--skip-missing", "--resume"]
    outputs = ["--results-dir", str(tmp_path / "res"), "--cache-dir", str(tmp_path / "cache")]
    assert lrgb.main([*argv, *TINY, *outputs]) == 0
    out = capsys.readouterr().out
    results = json.loads((tmp_path / "res" / "results.json").read_text())
    assert [(c["dataset"], c["variant"]) for c in results["cells"]] == [
        ("peptides-func", "swan")]
    # one line per missing data set: its cells, what is missing, how to get it
    lines = results["not_run"]
    assert [line.split(":")[0] for line in lines] == ["peptides-struct / swan",
                                                      "pascalvoc-sp / swan"]
    for line in lines:  # short (issue 47: they were 600 characters, said three times)
        assert "\n" not in line and ": not run: data unavailable (" in line
        assert "raw file(s) missing, " in line and len(line) < 200
    # how to get each file: once, before the work
    assert out.count("how to get them:") == 1 and out.count("download https://") == 3
    # one folder in both lines: where a download was to write, the advice says to put it
    tried = [line.split(" -> ")[1] for line in out.splitlines()
             if line.startswith("Downloading ") and " -> " in line]
    assert all(f"put it at {path}" in out for path in tried)
    assert tried or f"put it at {data}" in out
    said = out.split("PARTIAL RUN (--skip-missing): 2 data set(s) missing:\n")[1]
    assert said.splitlines()[:2] == [f"  {line}" for line in lines]
    table = (tmp_path / "res" / "table.md").read_text()
    assert "| peptides-func | swan | AP |" in table
    assert all(f"- {line}" in table for line in lines)


def test_make_reproduce_lrgb_fails_only_when_nothing_could_run(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    argv = make_command("reproduce-lrgb", empty, "EPOCHS=1", "SEEDS=0")
    message = str(exits(lrgb.main, [*argv, *TINY, "--results-dir", str(tmp_path / "res")]).code)
    head, *per_set, tail = message.splitlines()
    assert head == "no cell has its data, nothing was trained:"
    per_set = per_set[:per_set.index("how to get them:")]  # then the details, once
    assert [line.split(":")[0] for line in per_set] == ["  peptides-func / swan",
                                                        "  peptides-struct / swan",
                                                        "  pascalvoc-sp / swan"]
    assert tail == "get the files above"
    assert not (tmp_path / "res").exists()


def test_make_strict_keeps_the_refusal_naming_what_lifts_it(tmp_path):
    data = write_peptides(tmp_path / "data")
    argv = make_command("reproduce-lrgb", data, "STRICT=1")
    assert "--skip-missing" not in argv and "--all" in argv
    message = str(exits(lrgb.main, [*argv, *TINY, "--results-dir", str(tmp_path / "res")]).code)
    assert message.startswith("missing data, nothing was trained:\n  peptides-struct / swan:")
    assert message.endswith("pass --skip-missing (make: leave out STRICT=1) to run only the "
                            "cells whose data is present")
    assert not (tmp_path / "res").exists()


# ------------------------------------------------------------- interrupts near the end


def test_a_held_interrupt_arrives_after_the_block(monkeypatch):
    """Inside `held()` Ctrl-C is recorded and raised when the block is whole; an error of
    the block wins (the run ends either way); SIG_IGN is left alone."""
    from swan_jax.runs import interrupts

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, whatever ran
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs at the next bytecode: it must only record
            assert interrupts.holding()
            done.append("whole")
    assert done == ["whole"] and not interrupts.holding()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(OSError, match="disk"), interrupts.held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        raise OSError("disk")
    monkeypatch.setattr(signal, "getsignal", lambda sig: signal.SIG_IGN)
    with interrupts.held():  # nothing to hold, nothing replaced
        pass


def _interrupt_inside(monkeypatch, owner, name: str, when) -> None:
    """`owner.name` sends this process SIGINT in the middle of its work when `when(args)`."""
    real = getattr(owner, name)

    def interrupted(*args, **kwargs):
        if when(args):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # a Python-level handler would have raised by now
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupted)


@pytest.mark.parametrize("where", ["final checkpoint write", "final scoring"])
def test_an_interrupt_at_the_end_loses_no_epoch_and_exits_130(where, tmp_path, monkeypatch,
                                                               capsys):
    """Ctrl-C in the middle of orbax writing the last epoch's checkpoint, or of the final
    scores: the write completes, the run exits 130 with the resume command (not a disk
    error, not exit 0), every epoch is kept, and the resume only scores and records."""
    from swan_jax.train import _loop

    if where == "final checkpoint write":  # once orbax has made the temporary folder
        from orbax.checkpoint._src.path import atomicity

        real, sent = atomicity._create_tmp_directory, []

        async def interrupted(makedir, tmp_dir, **kwargs):
            made = await real(makedir, tmp_dir, **kwargs)
            if "3.orbax-checkpoint-tmp" in str(tmp_dir) and not sent:
                sent.append(os.kill(os.getpid(), signal.SIGINT))
            return made

        monkeypatch.setattr(atomicity, "_create_tmp_directory", interrupted)
    else:
        _interrupt_inside(monkeypatch, _loop, "_result", lambda args: True)
    argv = [*TINY_TRANSFER, "--results-dir", str(tmp_path / "res"), "--cache-dir",
            str(tmp_path / "cache")]
    capsys.readouterr()
    assert exits(transfer.main, argv).code == 130
    err = capsys.readouterr().err
    [folder] = (tmp_path / "res" / "checkpoints" / "line" / "3" / "swan").iterdir()
    assert not any(word in err for word in ("Traceback", "Exception ignored", "free space"))
    assert err.splitlines()[-2:] == [
        f"interrupted: 3 epoch(s) of the running program are safely checkpointed in "
        f"{folder}; no program has finished yet ({tmp_path / 'res' / 'results.json'} is "
        f"written when one does).",
        "resume with: " + shlex.join([sys.executable, "-m", "swan_jax.experiments.transfer",
                                      *argv, "--resume"])]
    assert max(int(p.name) for p in folder.iterdir() if p.name.isdigit()) == 3
    assert [json.loads(line)["epoch"] for line in
            (folder / "history.jsonl").read_text().splitlines()] == [0, 1, 2]
    monkeypatch.undo()
    assert transfer.main([*argv, "--resume"]) == 0
    assert "resuming after epoch 3 of 3" in capsys.readouterr().out
    [record] = json.loads((tmp_path / "res" / "results.json").read_text())["records"]
    assert record["epochs_completed"] == 3


def test_the_watchdog_waits_for_a_held_write(tmp_path):
    """The command line's watchdog ends a process whose main thread does not take a signal
    within `grace` seconds; a held checkpoint write is not stuck: it waits for it."""
    done = tmp_path / "done"
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, pathlib, signal, sys, time
        from swan_jax.runs import interrupts
        from swan_jax.experiments import signals

        try:
            with signals.interrupts_like_ctrl_c(lambda: "stuck", grace=0.2):
                with interrupts.held():
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(1.5)  # a long write, 7x the grace
                    pathlib.Path({str(done)!r}).touch()
        except KeyboardInterrupt:
            sys.exit(signals.exit_code())
        """)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert child.returncode == 130 and "stuck" not in child.stderr, child.stderr
    assert done.exists()


# ------------------------------------------------------- the library's line, and only it


def test_a_solver_out_of_steps_logs_no_callback_traceback(caplog):
    """JAX logs a failed callback with its traceback and equinox's banner before raising
    it; for a SWAN solver error `clear_errors` raises the one sentence and drops that log."""
    import jax

    import swan_jax as sj
    from tests.test_api_checks import inputs

    graph, cfg, params, x = inputs(True)
    step = jax.jit(lambda p: sj.solve(p, graph, x, cfg, "tsit5", rtol=1e-10, atol=1e-10,
                                      max_steps=2))
    with caplog.at_level(logging.DEBUG, logger="jax._src.callback"):
        with pytest.raises(sj.SolverError, match=r"^solver 'tsit5' used its whole budget"):
            with sj.solvers.clear_errors():
                jax.block_until_ready(step(params))
    assert [r.getMessage() for r in caplog.records if r.name == "jax._src.callback"] == []
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="jax._src.callback"):  # outside: left alone
        with pytest.raises(Exception, match="max_steps=2"):
            jax.block_until_ready(step(params))
    assert any(r.name == "jax._src.callback" for r in caplog.records)


def test_background_errors_go_to_a_log_file_not_the_terminal(tmp_path, capfd):
    """What orbax's threads report after the run's own error (an unraisable exception; an
    asyncio task whose exception nobody retrieved) lands in <results>/background-errors.log."""
    import asyncio
    import gc

    from swan_jax.experiments import command

    before = logging.getLogger("asyncio").propagate
    try:
        command.log_background_errors(tmp_path)

        async def fails():
            raise ValueError("RESOURCE_EXHAUSTED: No space left on device")

        loop = asyncio.new_event_loop()
        task = loop.create_task(fails())
        loop.run_until_complete(asyncio.sleep(0.01))
        loop.close()
        del task
        gc.collect()
        sys.unraisablehook(type("U", (), {"exc_type": RuntimeError, "exc_value": RuntimeError(
            "Event loop is closed"), "exc_traceback": None, "err_msg": None, "object": None}))
    finally:
        logging.getLogger("asyncio").propagate = before
        for handler in list(logging.getLogger("asyncio").handlers):
            logging.getLogger("asyncio").removeHandler(handler)
    out, err = capfd.readouterr()
    assert "Traceback" not in err and "RESOURCE_EXHAUSTED" not in err + out
    log = (tmp_path / command.BACKGROUND_LOG).read_text()
    assert "Task exception was never retrieved" in log and "No space left on device" in log
    assert "RuntimeError: Event loop is closed" in log


def test_a_truncated_checkpoint_is_its_one_line_alone(tmp_path, capsys):
    """Resuming from a truncated checkpoint (a real orbax restore, in a process of its
    own: the tracebacks came from tensorstore's threads at exit): the one line, no more."""
    argv = [*TINY_TRANSFER, "--results-dir", str(tmp_path / "res"), "--cache-dir",
            str(tmp_path / "cache"), "--checkpoint-seconds", "0"]
    assert transfer.main(argv) == 0
    [folder] = (tmp_path / "res" / "checkpoints" / "line" / "3" / "swan").iterdir()
    for data in (folder / "3" / "state").rglob("d/*"):  # the arrays, not their metadata
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 3])
    (tmp_path / "res" / "results.json").unlink()
    # without the suite's compilation cache (tests/conftest.py), as on a first run: with
    # the programs read from it, the restore fails before tensorstore's threads report
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    child = subprocess.run([sys.executable, "-m", "swan_jax.experiments.transfer", *argv,
                            "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=env)
    assert child.returncode == 1
    [line] = child.stderr.splitlines()
    assert line.startswith(f"the checkpoint {folder / '3'} cannot be read (")
    assert line.endswith("delete that folder to resume from epoch 2, or pass --overwrite "
                         "(without --resume) to start the program again")


# ------------------------------------------------ the Python API checked like the CLI


def _never_trained(monkeypatch):
    """Fail the test if `train` gets past its initialisation."""
    from swan_jax.train import _loop

    monkeypatch.setattr(_loop, "fresh_state", lambda *a, **k: pytest.fail("it trained"))


@pytest.mark.parametrize("grid, line", [
    ((), "grid is empty: give at least one grid point, e.g. [{}] (the default) or "
         "[{'learning_rate': 1e-3}]"),
    ({"epsilon": 0.1}, "grid must be a list of grid points (dicts of hyper-parameters), got "
                       "dict"),
    ([{"epsilon": -1.0, "beta": 1.0}], "grid point 0: epsilon must be a finite number > 0, "
                                       "got -1.0"),
    ([{"epsilon": 0.1, "beta": 1.0}, {"epsilon": float("nan"), "beta": 1.0}],
     "grid point 1: epsilon must be a finite number > 0, got nan"),
    ([{"epsilon": 0.1, "beta": 1.0, "learning_rate": 0.0}],
     "grid point 0: learning_rate must be a finite number > 0, got 0.0"),
    ([{"epsilon": 0.1, "beta": 1.0, "epsilonn": 0.2}],
     "grid: key(s) 'epsilonn' are read by nothing: model_fn(hp) never reads them and train "
     "reads only learning_rate, weight_decay, grad_clip; drop them from the grid, or read "
     "them in model_fn"),
])
def test_train_checks_its_grid_before_anything_compiles(grid, line, monkeypatch):
    from swan_jax.settings import SettingError
    from swan_jax.train import TrainConfig, train
    from tests.train_script import line_swap_dataset, model_fn, splits

    _never_trained(monkeypatch)
    with pytest.raises(SettingError) as err:
        train(model_fn, splits(line_swap_dataset(12)), TrainConfig(epochs=1, progress=False),
              grid)
    assert str(err.value) == line


def test_a_grid_key_read_only_in_the_forward_pass_is_accepted(monkeypatch):
    """A model may read a key late (in `__call__`): the check then traces a forward pass
    (no compile) before refusing anything."""
    import flax.linen as nn

    from swan_jax.train import TrainConfig, train
    from tests.train_script import line_swap_dataset, model_fn, splits

    class Scaled(nn.Module):
        hp: Any

        @nn.compact
        def __call__(self, graph):
            return model_fn(self.hp)(graph) * self.hp["scale"]

    from swan_jax.train import _loop

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(_loop, "fresh_state", reached)
    with pytest.raises(Reached):  # past the checks, where training starts
        train(lambda hp: Scaled(hp), splits(line_swap_dataset(12)),
              TrainConfig(epochs=1, progress=False), [{"epsilon": 0.1, "beta": 1.0,
                                                       "scale": 2.0}])


# ------------------------------------------------------------ user data, one line each


def test_string_node_features_are_refused_naming_the_field():
    from swan_jax.data import GraphDataset

    graph = {"nodes": np.array([["C"], ["N"]]), "senders": np.array([0]),
             "receivers": np.array([1])}
    with pytest.raises(ValueError) as err:
        GraphDataset.from_graphs([graph])
    assert str(err.value) == ("nodes must be numbers, got dtype <U1 (e.g. 'C'): encode text "
                              "or categories as numbers first (an index, or one-hot columns)")


def test_a_cache_of_the_wrong_arrays_is_named_and_rebuilt(tmp_path, capsys):
    """A valid file whose arrays are no data set (sum(n_node) != rows): named, then None
    (the loader rebuilds it), not a traceback that names no file."""
    from swan_jax.data import GraphDataset
    from swan_jax.data.dataset import CACHE_VERSION

    path = tmp_path / "cache.npz"
    np.savez(path, nodes=np.ones((3, 2)), n_node=np.asarray([5]), n_edge=np.asarray([0]),
             senders=np.zeros(0, np.int32), receivers=np.zeros(0, np.int32),
             cache_version=np.asarray(CACHE_VERSION))
    assert GraphDataset.load(path) is None
    assert capsys.readouterr().err == (f"cache {path} holds arrays that are not a data set "
                                       f"(nodes has 3 rows but sum(n_node) = 5); rebuilding it\n")


@pytest.mark.parametrize("text", ["{\"records\": [", "[]", "{\"records\": 3}", "\xff"])
def test_a_corrupt_results_file_on_resume_is_one_line(text, tmp_path):
    from swan_jax.experiments.records import ResultsFile

    path = tmp_path / "results.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(FileExistsError) as err:
        ResultsFile(path, resume=True)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path} is not a results file --resume can "
                                                f"continue (")
    assert line.endswith("move it away (the checkpoints are kept and resume), or pass "
                         "--overwrite to start again")


# ------------------------------------------------------------------ smaller things


def test_swan_results_prints_percent_metrics_as_table_md_does():
    from swan_jax.experiments import results

    ap = {"dataset": "peptides-func", "variant": "swan", "metric": "ap", "test_mean": 0.5875,
          "test_std": 0.0077, "seeds": [0, 1, 2]}
    assert results.cell_line(ap) == ("peptides-func / swan: test ap 58.75 ± 0.77 % over 3 "
                                     "seed(s)")
    mae = {**ap, "metric": "mae", "test_mean": 0.2571, "test_std": 0.0018}
    assert results.cell_line(mae).startswith("peptides-func / swan: test mae 0.2571 ± 0.0018 "
                                             "over")


def test_internal_grid_name_is_not_offered_in_help(capsys):
    with pytest.raises(SystemExit):
        lrgb.main(["--help"])
    out = capsys.readouterr().out
    assert "--grid-name" not in out and "--grid {paper,full}" in out


@pytest.mark.parametrize("columns", [None, 0])
def test_featurisation_progress_in_a_log_or_a_zero_width_terminal_is_plain_lines(
        columns, monkeypatch, capsys):
    """No terminal (a log): no carriage returns; a terminal of 0 columns: lines, not a bar
    tqdm draws 0 characters wide for minutes."""
    import shutil

    from swan_jax.data import progress

    if columns is not None:
        monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
        monkeypatch.setattr(shutil, "get_terminal_size", lambda *a: os.terminal_size((0, 24)))
    assert not progress.watched()
    clock = iter(range(0, 1000, 20))
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    assert list(progress.progress(list("abcd"), desc="Peptides", unit="mol")) == list("abcd")
    err = capsys.readouterr().err
    assert "\r" not in err
    assert err.splitlines() == ["Peptides: 2 of 4 mol(s)", "Peptides: 4 of 4 mol(s)"]


def test_help_says_each_default_once(capsys):
    with pytest.raises(SystemExit):
        lrgb.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "raw files (default $SWAN_DATA_DIR, else data/) --" in text
    for said in ("else data/)", "<results-dir>/checkpoints)"):  # was followed by argparse's
        assert f"{said} (default: none)" not in text and said in text   # "(default: none)"


def test_a_model_that_maps_over_its_hp_reads_every_key(monkeypatch):
    """`jax.tree_util.tree_map` over hp counts as reading it all (never refused wrongly)."""
    import jax

    from swan_jax.train import TrainConfig, _loop, train
    from tests.train_script import line_swap_dataset, model_fn, splits

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(_loop, "fresh_state", reached)
    with pytest.raises(Reached):
        train(lambda hp: model_fn(jax.tree_util.tree_map(lambda v: v, hp)),
              splits(line_swap_dataset(12)), TrainConfig(epochs=1, progress=False),
              [{"epsilon": 0.1, "beta": 1.0, "note": 3.0}])


# --- issue 47: checks before compile, --resume with other settings, messages ------------

ISSUE47_TRANSFER = ["--topology", "line", "--distance", "3", "--model", "swan"]


def graph_level_data(columns: int = 1) -> dict[str, GraphDataset]:
    rng = np.random.default_rng(0)
    graphs = [{"nodes": rng.normal(size=(4, 2)).astype(np.float32),
               "senders": np.array([0, 1, 2]), "receivers": np.array([1, 2, 3]),
               "graph_targets": np.ones((1, columns), np.float32)} for _ in range(6)]
    data = GraphDataset.from_graphs(graphs)
    return {"train": data, "val": data}


def small_model(readout, level="graph"):
    head = sj.GraphReadout(readout) if level == "graph" else sj.NodeReadout(readout)
    return lambda hp: sj.Model(sj.LinearEncoder(4), sj.SWANBlock(
        sj.SWANConfig(num_layers=1, epsilon=0.1)), head)


def quiet_config(**changes):
    from swan_jax.train import TrainConfig

    return TrainConfig(**{"epochs": 1, "batch_size": 2, "task_level": "graph",
                          "progress": False, "quiet": True, **changes})


@pytest.mark.parametrize("readout, level, loss, match", [
    ((8, 3), "graph", "mse", r"predicts 3 column\(s\) per graph but the targets have 1 "
                             r"\(loss 'mse'.*broadcast\); set the readout's last width to 1"),
    ((8, 2), "graph", "l1", r"predicts 2 column\(s\) per graph but the targets have 1"),
    ((1,), "node", "mse", r"predicts \d+ rows for a batch of \d+ graph rows "
                          r"\(task_level='graph'\).*GraphReadout"),
    ((1,), "graph", "ce", r"loss 'ce' needs one logit per class \(at least 2 output columns\)"),
])
def test_train_refuses_an_output_that_does_not_fit_the_targets_before_compiling(
        readout, level, loss, match, monkeypatch):
    """Was: a broadcast `[R, 3] - [R, 1]` trained and reported a score, no word."""
    from swan_jax.train import _loop

    # refused on the initialisation's shapes, before the memory check and any compile
    monkeypatch.setattr(_loop._memory, "check_step_memory",
                        lambda *a, **k: pytest.fail("went on to compile"))
    with pytest.raises(ShapeMismatch, match=match):
        train(small_model(readout, level), graph_level_data(), quiet_config(loss=loss))


def test_class_losses_refuse_targets_of_several_columns():
    with pytest.raises(ShapeMismatch, match=r"loss 'ce' takes one integer class per graph, "
                                            r"but the targets have 3 columns"):
        train(small_model((4,)), graph_level_data(3), quiet_config(loss="ce"))


def test_an_encoder_of_another_feature_width_is_one_line():
    from swan_jax.encoders import AtomEncoder

    model = lambda hp: sj.Model(AtomEncoder(4), sj.SWANBlock(  # noqa: E731
        sj.SWANConfig(num_layers=1, epsilon=0.1)), sj.GraphReadout((1,)))
    with pytest.raises(ShapeMismatch, match=r"does not take the training graphs \(2 node "
                                            r"feature\(s\), no edge features per row\): "
                                            r"AtomEncoder expects .*\[N, 9\]"):
        train(model, graph_level_data(), quiet_config())


def test_a_fitting_output_trains(tmp_path):
    result = train(small_model((8, 1)), graph_level_data(), quiet_config())
    assert np.isfinite(result.runs[0]["val_at_best"])


def test_a_loss_that_returns_nan_at_once_is_not_blamed_on_the_learning_rate():
    def nan_loss(pred, target, mask):
        return jnp.mean(jnp.log(-jnp.abs(pred)))

    with pytest.raises(TrainingDiverged) as err:
        train(small_model((1,)), graph_level_data(), quiet_config(loss=nan_loss))
    text = str(err.value)
    assert "before any update, so the learning rate is not the cause" in text
    assert "the loss itself" in text and "NaN or infinite features or targets" in text


def test_divergence_after_updates_lists_the_loss_and_the_learning_rate():
    from swan_jax.train._epoch import divergence_causes

    later = divergence_causes("training loss or gradient", 3, 2)
    assert "the loss returning NaN on some batch" in later and "learning rate" in later
    assert "split" in divergence_causes("predictions on the val split", 0, None)


def write_saved_results(folder: Path, argv: list[str]) -> Path:
    """A results.json as a finished run of `argv` leaves it (its resolved config)."""
    cfg = command.parse_config(transfer.EXPERIMENT, argv + ["--results-dir", str(folder)])
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"config": to_dict(cfg), "records": []}))
    return folder


@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_resume_with_other_settings_is_refused_naming_them(tmp_path, capsys, dry):
    res = write_saved_results(tmp_path / "res", ISSUE47_TRANSFER)
    before = (res / "results.json").read_text()
    argv = ISSUE47_TRANSFER + ["--results-dir", str(res), "--resume", "--lr", "0.01",
                               "--seeds", "0,1", "--epochs", "7", "--checkpoint-seconds", "0",
                               "--no-progress"] + (["--dry-run"] if dry else [])
    err = exits(transfer.main, argv)
    line = str(err.code)
    assert "\n" not in line and "--lr 0.001 -> 0.01" in line and "--seeds 0,1,2,3 -> 0,1" in line
    assert "--overwrite" in line and "another --results-dir" in line
    for cadence in ("epochs", "checkpoint", "progress"):  # decide no number: not named
        assert cadence not in line
    assert (res / "results.json").read_text() == before and not (res / "checkpoints").exists()


def test_resume_with_the_same_settings_and_more_epochs_passes_the_check(tmp_path):
    from swan_jax.experiments.records import ResultsFile
    from swan_jax.experiments.sweep import check_resume

    res = write_saved_results(tmp_path / "res", ISSUE47_TRANSFER)
    cfg = command.parse_config(transfer.EXPERIMENT, ISSUE47_TRANSFER + [
        "--results-dir", str(res), "--resume", "--epochs", "9", "--checkpoint-seconds", "1",
        "--no-progress", "--cache-dir", str(tmp_path / "c")])
    check_resume(cfg, ResultsFile(res / "results.json", resume=True))  # no refusal


@pytest.mark.parametrize("where", ["flag", "toml"])
def test_an_empty_results_dir_is_refused(tmp_path, capsys, where, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if where == "flag":
        argv = ISSUE47_TRANSFER + ["--results-dir", "", "--dry-run"]
    else:
        (tmp_path / "run.toml").write_text('results_dir = ""\n')
        argv = ISSUE47_TRANSFER + ["--config", "run.toml", "--dry-run"]
    assert exits(transfer.main, argv).code == 2
    assert "must be a path, got an empty one" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == ([] if where == "flag" else [tmp_path / "run.toml"])


def test_dry_run_refuses_an_implicit_solver_naming_the_batch_size_that_fits(capsys, tmp_path):
    argv = ISSUE47_TRANSFER + ["--solver", "kvaerno5", "--results-dir", str(tmp_path / "r"),
                               "--dry-run"]
    line = str(exits(transfer.main, argv).code)
    assert "solver 'kvaerno5' is implicit" in line and "--batch-size 15 fits" in line
    assert "a batch of 512 graph(s) of up to 4 nodes x 64 channels" in line
    assert not (tmp_path / "r").exists()
    assert transfer.main(argv[:-1] + ["--batch-size", "15", "--dry-run"]) == 0


def test_dry_run_checks_the_output_folders_and_an_existing_results_file(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    line = str(exits(transfer.main, ISSUE47_TRANSFER + [
        "--results-dir", str(tmp_path / "file" / "r"), "--dry-run"]).code)
    assert line.startswith("--results-dir") and "is a file" in line
    res = write_saved_results(tmp_path / "res", ISSUE47_TRANSFER)
    line = str(exits(transfer.main, ISSUE47_TRANSFER + ["--results-dir", str(res),
                                                        "--dry-run"]).code)
    assert "exists; pass --resume" in line


def test_dry_run_prints_an_estimate_or_says_none_is_recorded(tmp_path, capsys):
    from swan_jax.experiments.estimate import estimate_line
    from swan_jax.experiments.sweep import Program

    done = tmp_path / "r" / "results.json"
    done.parent.mkdir()
    cpu = {"device": "cpu:0", "device_kind": "cpu"}
    done.write_text(json.dumps({"experiment": "transfer", "records": [
        {"name": "line/3/swan/program", "runs": [{}] * 4, "machine": cpu,
         "first_epoch_seconds": 10.0, "seconds_per_epoch": 0.5},
        {"name": "ring/3/swan/program", "runs": [{}] * 4, "machine": cpu,
         "first_epoch_seconds": 10.0, "seconds_per_epoch": 0.0}]}))  # untimed: no pace
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"experiment": "graphprop", "records": [
        {"name": "ring/3/swan/program", "runs": [{}], "machine": cpu,
         "first_epoch_seconds": 1.0, "seconds_per_epoch": 1.0}]}))
    plan = [Program({}, {}, [], "x", "line/3/swan/program", tmp_path),
            Program({}, {}, [], "y", "ring/3/swan/program", tmp_path)]
    line = estimate_line("transfer", plan, [8, 8], 11, files=[other, done], platform="cpu")
    assert "at most 20 s for 1 of 2 program(s)" in line  # 10 + 10 x 0.5 x 8 / 4
    assert "recorded on cpu" in line and "the other 1" in line
    none = estimate_line("transfer", plan, [8, 8], 11, files=[done], platform="gpu")
    assert "no pace is recorded" in none and "accelerator" in none
    assert transfer.main(ISSUE47_TRANSFER + ["--results-dir", str(tmp_path / "r2"),
                                             "--dry-run"]) == 0
    assert "# estimate: " in capsys.readouterr().out


def test_from_graphs_takes_no_node_features_and_refuses_no_graphs():
    import networkx as nx

    data = GraphDataset.from_graphs([nx.path_graph(3), nx.cycle_graph(4)], node_features=None)
    assert data.nodes.shape == (7, 1) and np.all(data.nodes == 1)
    with pytest.raises(ValueError, match="from_graphs got no graphs"):
        GraphDataset.from_graphs([])


def test_graphprop_notes_say_the_batch_size_used():
    from swan_jax.experiments import graphprop

    cfg = graphprop.EXPERIMENT.default_config(per_size=(1, 1, 1), node_counts=tuple(
        range(25, 33)))
    [note] = graphprop.EXPERIMENT.notes(cfg)
    assert "batch size 8 for every setting (batch_size 512 capped" in note


def test_a_failed_save_leaves_no_orbax_thread_to_log_at_exit(caplog):
    """A full disk fails the save while orbax's writer threads still wait; they are
    joined, quietly, before the line is raised (was: 34 lines at interpreter exit)."""
    from swan_jax.runs import checkpoint

    release = threading.Event()

    class Writer(threading.Thread):  # stands for orbax's `_SignalingThread`
        def run(self):
            release.wait(5)
            logging.getLogger("absl").error("cannot schedule new futures")

        def join(self, timeout=None):
            super().join(timeout)
            raise RuntimeError("the thread's own failure, re-raised")

    Writer.__module__ = "orbax.checkpoint.fake"
    writer = Writer()
    writer.start()
    threading.Timer(0.1, release.set).start()
    with caplog.at_level(logging.ERROR, logger="absl"):
        checkpoint._settle_background(timeout=5)
    assert not writer.is_alive() and "cannot schedule" not in caplog.text


def test_swan_predict_checks_data_and_out_before_any_compute(tmp_path, capsys, monkeypatch):
    from swan_jax.experiments import predict

    monkeypatch.setattr(predict, "predict_run", lambda *a, **k: pytest.fail("computed"))
    script = tmp_path / "byod.py"
    script.write_text("graphs = []\n")
    assert predict.main([str(tmp_path), "--data", str(script), "--out",
                         str(tmp_path / "p.npz")]) == 1
    err = capsys.readouterr().err
    assert "not a GraphDataset file" in err and ".npz archive GraphDataset.save writes" in err
    assert "pickle" not in err
    data = tmp_path / "g.npz"
    GraphDataset.from_graphs([{"nodes": np.ones((2, 1), np.float32), "senders": [0],
                               "receivers": [1]}]).save(data)
    (tmp_path / "file").write_text("")
    cases = {str(tmp_path / "file" / "p.npz"): "is a file, not a folder; choose another --out",
             str(tmp_path): "is a folder; give a file path"}
    for out, words in cases.items():
        assert predict.main([str(tmp_path), "--data", str(data), "--out", out]) == 1
        assert words in capsys.readouterr().err
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # a read-only folder (as root)
    assert predict.main([str(tmp_path), "--data", str(data), "--out",
                         str(tmp_path / "ro" / "p.npz")]) == 1
    assert "is not writable; choose another --out" in capsys.readouterr().err
