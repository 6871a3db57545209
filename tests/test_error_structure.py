"""Errors carry the settings that fix them; only the command layer spells them as flags.

`SolverError` and the data errors hold structured advice (setting names, suggested
values); the library renders it with Python names, `experiments/command.py` with the
declared flags. Also: `solve` with a caller's step-size controller and `SaveAt`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from swan_jax import solvers
from swan_jax.data.errors import (
    HINT,
    SKIP_BAD_ROWS,
    VERIFY_MD5,
    ChecksumError,
    DataFormatError,
    DownloadError,
)
from swan_jax.experiments import command, lrgb, transfer
from swan_jax.experiments import node_classification as nce
from swan_jax.solvers import SolverError
from tests.graphs import random_undirected

PACKAGE = Path(sj.__file__).resolve().parent
FLAG = re.compile(r"--[a-z]")


def inputs(nodes: int = 5, width: int = 2, layers: int = 3):
    rng = np.random.default_rng(0)
    cfg = sj.SWANConfig(num_layers=layers)
    params = sj.init_params(jax.random.PRNGKey(0), width, cfg)
    x0 = jnp.asarray(rng.normal(size=(nodes, width)), jnp.float32)
    return params, random_undirected(rng, nodes), x0, cfg


def out_of_steps() -> SolverError:
    params, graph, x0, cfg = inputs()
    with pytest.raises(SolverError) as err:
        sj.solve(params, graph, x0, cfg, "tsit5", rtol=1e-10, atol=1e-10, max_steps=2)
    return err.value


# ------------------------------------------------------------------ solver errors


def test_a_solver_error_carries_the_settings_and_renders_python_names():
    err = out_of_steps()
    assert err.settings == ("rtol", "atol", "max_steps", "solver")
    assert err.what == "solver 'tsit5' used its whole budget of max_steps=2 steps before " \
                       "t1 = num_layers * epsilon"
    assert str(err) == (f"{err.what}: loosen rtol / atol, raise max_steps, or try a stiff "
                        f"solver such as 'kvaerno5'")
    assert not FLAG.search(str(err))


def test_the_command_layer_renders_the_same_advice_with_its_flags():
    err = out_of_steps()
    line = command.solver_error_message(transfer.EXPERIMENT, err)
    assert line == (f"solver error: {err.what}: loosen --rtol / --atol, raise --max-steps, "
                    f"or try a stiff solver such as --solver kvaerno5")
    # A grid axis (epsilon) is spelled by its flag too.
    failed = SolverError("solver 'heun' failed", (solvers.SMALLER_STEPS, solvers.TIGHTEN))
    assert command.solver_error_message(transfer.EXPERIMENT, failed) == (
        "solver error: solver 'heun' failed: lower --epsilon or tighten --rtol / --atol")
    assert str(failed) == "solver 'heun' failed: lower epsilon or tighten rtol / atol"


def test_a_note_added_on_the_way_up_keeps_the_structure():
    err = out_of_steps()
    noted = err.with_note("line/3/swan: in epoch 1 of 3")
    # What `train` does today: a new error from the old one's text plus the context.
    from_text = SolverError(f"{err} (line/3/swan: in epoch 1 of 3)")
    for e in (noted, from_text):
        assert (e.what, e.advice, e.notes) == (err.what, err.advice,
                                               ("line/3/swan: in epoch 1 of 3",))
        assert command.solver_error_message(transfer.EXPERIMENT, e).endswith(
            "--solver kvaerno5 (line/3/swan: in epoch 1 of 3)")
    plain = SolverError("something else entirely")
    assert (plain.what, plain.advice, plain.notes) == ("something else entirely", (), ())


def test_clear_errors_gives_the_structure_back_from_inside_a_users_jit():
    params, graph, x0, cfg = inputs()
    step = jax.jit(lambda p: sj.solve(p, graph, x0, cfg, "tsit5", rtol=1e-10, atol=1e-10,
                                      max_steps=2))
    with pytest.raises(SolverError) as err, sj.solvers.clear_errors():
        jax.block_until_ready(step(params))
    assert err.value.settings == ("rtol", "atol", "max_steps", "solver")


# -------------------------------------------------------------------- data errors


def test_data_hints_are_settings_rendered_by_the_library_and_the_command_line():
    err = DataFormatError("x.csv: row 2: bad", path="x.csv", row=2, hint=SKIP_BAD_ROWS)
    assert (err.hint.setting, err.hint.value, err.switch) == ("skip_bad_rows", True,
                                                              "skip_bad_rows=True")
    assert str(err) == "x.csv: row 2: bad (pass skip_bad_rows=True to skip such rows)"
    assert command.data_error_message(lrgb.EXPERIMENT, err) == (
        "LRGB data error: x.csv: row 2: bad (pass --skip-bad-rows to skip such rows)")
    # Node classification has no such setting: the library's words stay.
    assert command.data_error_message(nce.EXPERIMENT, err).endswith(
        "data error: x.csv: row 2: bad (pass skip_bad_rows=True to skip such rows)")


def test_a_hint_placed_inside_the_message_and_a_false_switch():
    err = ChecksumError(f"f.csv has md5 1, expected 2: delete it, or {HINT}.", path="f.csv")
    assert err.hint == VERIFY_MD5
    assert str(err) == "f.csv has md5 1, expected 2: delete it, or pass verify_md5=False " \
                       "to use a file of your own."
    assert command.data_error_message(lrgb.EXPERIMENT, err).endswith(
        "delete it, or pass --no-verify-md5 to use a file of your own.")
    down = DownloadError("could not download u (timeout).", path="f", url="u")
    assert command.data_error_message(lrgb.EXPERIMENT, down).endswith(
        "(timeout). (put the file there by hand; --no-download never downloads)")
    assert str(down).endswith("(put the file there by hand; download=False never downloads)")


# ------------------------------------------- output, checkpoint and memory errors


def test_a_results_file_that_exists_names_overwrite_as_a_setting(tmp_path):
    from swan_jax.runs import io

    io.save_json_atomic(tmp_path / "r.json", {})
    with pytest.raises(FileExistsError) as err:
        io.save_json_atomic(tmp_path / "r.json", {})
    assert isinstance(err.value, io.OutputExists) and err.value.settings == ("overwrite",)
    assert str(err.value) == f"{tmp_path / 'r.json'} exists; pass overwrite=True to replace it"
    assert command.error_message(transfer.EXPERIMENT, err.value) == (
        f"{tmp_path / 'r.json'} exists; pass --overwrite to replace it")


def test_a_folders_checkpoints_name_resume_as_a_setting(tmp_path):
    from swan_jax.train import CheckpointConflict, TrainConfig
    from swan_jax.train._folder import DROP_RESUME, FINGERPRINT_FORMAT, ProgramFolder

    folder = ProgramFolder(TrainConfig(checkpoint_dir=str(tmp_path)),
                           {FINGERPRINT_FORMAT: ("abc",)})
    folder.latest_epoch = lambda: 3  # a folder that holds checkpoints
    with pytest.raises(ValueError) as err:
        folder.check_fresh()
    assert isinstance(err.value, CheckpointConflict) and err.value.settings == ("resume",)
    assert str(err.value) == (f"{tmp_path} already holds checkpoints: pass resume=True to "
                              f"continue, or choose another directory")
    assert command.error_message(lrgb.EXPERIMENT, err.value) == (
        f"{tmp_path} already holds checkpoints: pass --resume to continue, or choose another "
        f"directory")
    other = CheckpointConflict(f"checkpoint in {tmp_path} belongs to another configuration; "
                               f"use a fresh directory or {HINT}", DROP_RESUME)
    assert str(other).endswith("use a fresh directory or drop resume=True")
    assert command.error_message(lrgb.EXPERIMENT, other).endswith(
        "use a fresh directory or drop --resume")


def test_a_step_too_large_names_batch_size_and_hidden_as_settings():
    from swan_jax.train import StepTooLarge
    from swan_jax.train._memory import check_step_memory

    with pytest.raises(StepTooLarge) as fits:
        check_step_memory(10 * 2**30, 2**30, 64, "64 graphs")
    assert fits.value.settings == ("batch_size", "batch_size")
    assert str(fits.value) == ("a training step needs about 10.0 GiB (batch budget 64 graphs, "
                               "batch_size=64) but only 1.0 GiB are free; batch_size=5 should "
                               "fit")
    assert command.error_message(transfer.EXPERIMENT, fits.value) == (
        "a training step needs about 10.0 GiB (batch budget 64 graphs, --batch-size 64) but "
        "only 1.0 GiB are free; --batch-size 5 should fit")
    with pytest.raises(StepTooLarge) as smaller:
        check_step_memory(10 * 2**30, 2**30, 1, "1 graph")
    assert str(smaller.value).endswith("are free; lower hidden or the number of runs (seeds "
                                       "x grid points)")
    assert command.error_message(transfer.EXPERIMENT, smaller.value).endswith(
        "are free; lower --hidden or the number of runs (seeds x grid points)")


def test_a_hinted_error_places_its_hints_in_order_and_the_rest_after():
    from swan_jax.settings import Hint, HintedError

    err = HintedError(f"a {HINT} b {HINT} c", Hint("x", 1), Hint("y", None, "no {switch}"),
                      Hint("z", True, "pass {switch}"))
    assert str(err) == "a x=1 b no y c (pass z=True)"
    assert err.render(lambda s, v: f"--{s}") == "a --x b no --y c (pass --z)"
    # A reader that cannot name a setting gets the library's keyword.
    assert err.render(lambda s, v: None if s == "x" else f"--{s}") == \
        "a x=1 b no --y c (pass --z)"
    assert str(HintedError("plain")) == "plain" and HintedError("plain").settings == ()


# ------------------------------------------------- no flag text in library raise sites

LIBRARY = ("solvers.py", "data", "runs", "train", "field.py",
           "models", "graph", "settings.py")
# Raise sites that still name a flag: none (io, train and checkpoint errors carry a
# `settings.Hint` since issue 21, the command layer spells it).
PENDING_FLAG_TEXT: dict[str, int] = {}


def _raise_texts(path: Path) -> list[tuple[int, str]]:
    """The string constants inside every `raise` statement of a module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            out += [(node.lineno, c.value) for c in ast.walk(node.exc)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return out


def test_no_library_raise_site_names_a_flag():
    files = [p for name in LIBRARY for p in ([PACKAGE / name] if name.endswith(".py")
                                            else sorted((PACKAGE / name).rglob("*.py")))]
    assert len(files) > 10
    found: dict[str, list[str]] = {}
    for p in files:
        for _, text in _raise_texts(p):
            if FLAG.search(text):
                found.setdefault(str(p.relative_to(PACKAGE)), []).append(text)
    counts = {name: len(texts) for name, texts in found.items()}
    assert counts == PENDING_FLAG_TEXT == {}, f"library errors naming command-line flags: {found}"


def test_the_scan_would_catch_a_flag_in_a_raise(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(x):\n    raise ValueError(f"{x} exists; pass --overwrite")\n')
    assert [text for _, text in _raise_texts(bad) if FLAG.search(text)] == [
        " exists; pass --overwrite"]


def test_the_data_modules_hold_no_flag_text():
    texts = [c.value for p in sorted((PACKAGE / "data").rglob("*.py"))
             for c in ast.walk(ast.parse(p.read_text()))
             if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    flagged = [t for t in texts if re.search(r"(?<![\w`])--[a-z][a-z-]+(?!\w)", t)
               and "\n" not in t]  # docstrings (several lines) may quote a command line
    assert flagged == []


# ------------------------------------------------ solve: controller and SaveAt


def _diffrax_direct(params, graph, x0, cfg, solver, controller, saveat, max_steps):
    """The same integration written against diffrax directly (the reference)."""
    ops = sj.field.build_operators(params, graph, x0, cfg)
    t1 = cfg.num_layers * cfg.epsilon
    term = diffrax.ODETerm(lambda t, y, args: sj.field.field_with_operators(
        params, graph, y, ops, cfg, t))
    return diffrax.diffeqsolve(term, solver, t0=0.0, t1=t1, dt0=cfg.epsilon, y0=x0,
                               saveat=saveat, stepsize_controller=controller,
                               max_steps=max_steps).ys


def test_solve_with_a_custom_controller_and_saveat_is_what_diffrax_gives():
    params, graph, x0, cfg = inputs()
    t1 = cfg.num_layers * cfg.epsilon
    ts = jnp.linspace(0.0, t1, 4)
    controller = diffrax.PIDController(rtol=1e-5, atol=1e-7, pcoeff=0.3, icoeff=0.4)
    saveat = diffrax.SaveAt(ts=ts)
    ours = sj.solve(params, graph, x0, cfg, "dopri5", stepsize_controller=controller,
                    saveat=saveat)
    direct = _diffrax_direct(params, graph, x0, cfg, diffrax.Dopri5(), controller, saveat,
                             solvers.DEFAULT_MAX_STEPS)
    assert ours.shape == (4, *x0.shape)
    np.testing.assert_allclose(ours, direct, rtol=1e-5, atol=1e-6)


def test_solve_with_only_a_saveat_returns_diffraxs_ys():
    params, graph, x0, cfg = inputs()
    both = sj.solve(params, graph, x0, cfg, saveat=diffrax.SaveAt(t0=True, t1=True))
    assert both.shape == (2, *x0.shape)  # t0 and t1
    np.testing.assert_allclose(both[0], x0)
    np.testing.assert_allclose(both[1], sj.solve(params, graph, x0, cfg), rtol=1e-5,
                               atol=1e-6)


def test_a_constant_controller_on_a_fixed_step_solver_gives_the_layers():
    params, graph, x0, cfg = inputs()
    ours = sj.solve(params, graph, x0, cfg, "heun",
                    stepsize_controller=diffrax.ConstantStepSize())
    np.testing.assert_allclose(ours, sj.solve(params, graph, x0, cfg, "heun"), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("solver", ["euler", "heun", diffrax.Euler()])
def test_an_adaptive_controller_with_a_fixed_step_solver_is_refused(solver):
    params, graph, x0, cfg = inputs()
    with pytest.raises(ValueError, match=r"stepsize_controller=PIDController is adaptive, "
                                         r"but solver '(euler|heun|Euler)' takes fixed "
                                         r"steps .*use an adaptive solver \(bosh3, tsit5"):
        sj.solve(params, graph, x0, cfg, solver,
                 stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6))


def test_contradicting_options_are_refused():
    params, graph, x0, cfg = inputs()
    with pytest.raises(ValueError, match=r"adaptive=False contradicts stepsize_controller="):
        sj.solve(params, graph, x0, cfg, "tsit5", adaptive=False,
                 stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6))
    with pytest.raises(ValueError, match=r"saveat or save_trajectory=True, not both"):
        sj.solve(params, graph, x0, cfg, saveat=diffrax.SaveAt(t1=True),
                 save_trajectory=True)


# ------------------------------------------------------------- the public face


def test_integrator_config_is_public_and_documented():
    assert sj.IntegratorConfig is solvers.IntegratorConfig
    assert "IntegratorConfig" in sj.__all__
    assert "solve" in sj.IntegratorConfig.__doc__
    assert sj.IntegratorConfig(solver="tsit5").options()["solver"] == "tsit5"
