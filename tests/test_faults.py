"""Faults a run meets end in one line naming the file and what to do (issue 23).

Two runs on one folder (the second is refused naming the first), a full disk while
checkpointing (a stubbed writer), a corrupt checkpoint, a truncated cache, a figure that
fails, SIGTERM (handled like Ctrl-C, also while a compiled step does not return), the
matplotlib backend left alone, and implicit solvers refused where they cannot run.
tests/BAD_INPUTS.md, section 12, lists each case with its message.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from swan_jax.experiments import command, locks, report, sweep, transfer
from tests.test_run_failures import TINY_TRANSFER, exits

ROOT = Path(__file__).resolve().parents[1]
# What orbax raises (from its writer thread) when the disk is full.
ORBAX_DISK_FULL = ('RESOURCE_EXHAUSTED: Error writing "w/0" in OCDBT database at local file '
                   '"{path}": Failed to write 16768 bytes to file 7: No space left on device '
                   "[os_error_code='28']")


def _python(code: str, **kwargs) -> subprocess.Popen:
    """A Python child running `code` from the repository root (stdout / stderr piped)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def _wait_for(path: Path, child: subprocess.Popen, what: str) -> None:
    """Until `path` exists (the child's signal that it got there); fail if it died."""
    for _ in range(1200):
        if path.exists():
            return
        if child.poll() is not None:
            pytest.fail(f"the child exited before {what}: {child.communicate()}")
        time.sleep(0.1)
    child.kill()
    pytest.fail(f"the child never reached {what}")


# ----------------------------------------------------------------------------- locks


def test_a_second_run_on_a_locked_folder_is_refused_naming_the_first(tmp_path):
    """The holder is another process; when it is SIGKILLed the kernel frees the lock."""
    res, ready = tmp_path / "res", tmp_path / "ready"
    holder = _python(f"""
        import pathlib, time
        from swan_jax.experiments.locks import folder_lock
        with folder_lock({str(res)!r}, flag="--results-dir"):
            pathlib.Path({str(ready)!r}).touch()
            time.sleep(600)
        """)
    try:
        _wait_for(ready, holder, "taking the lock")
        argv = [*TINY_TRANSFER, "--results-dir", str(res), "--cache-dir", str(tmp_path / "c")]
        err = exits(transfer.main, argv)
        assert re.fullmatch(
            rf"--results-dir {re.escape(str(res))} is in use by another run \(pid "
            rf"{holder.pid}: {re.escape(sys.executable)} -c\); wait for it to finish or "
            rf"stop it, or choose another --results-dir", str(err.code)), err.code
        assert sorted(p.name for p in res.iterdir()) == [locks.LOCK_NAME]  # nothing written
        assert not (tmp_path / "c").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with locks.folder_lock(res, flag="--results-dir"):  # freed by the kernel
        assert (res / locks.LOCK_NAME).read_text().startswith(f"pid {os.getpid()}: ")


def test_a_checkpoint_folder_shared_by_two_results_folders_is_refused(tmp_path):
    """Two runs with different --results-dir and one --checkpoint-dir; the refused one
    leaves nothing behind (its results folder, created for its lock, is removed)."""
    shared = tmp_path / "ckpt"
    with locks.folder_lock(shared, flag="--checkpoint-dir"):
        argv = [*TINY_TRANSFER, "--results-dir", str(tmp_path / "second"), "--checkpoint-dir",
                str(shared)]
        err = exits(transfer.main, argv)
        assert str(err.code).startswith(f"--checkpoint-dir {shared} is in use by another run "
                                        f"(pid {os.getpid()}: ")
        assert str(err.code).endswith("or choose another --checkpoint-dir")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert list(tmp_path.iterdir()) == []  # the lock file and the folder it made, gone


def test_a_lock_is_released_on_any_exit_and_leaves_the_tree_as_it_was(tmp_path):
    folder = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError, match="boom"), locks.folder_lock(folder, flag="--x"):
        with pytest.raises(locks.FolderInUse, match=r"^--x .* is in use by another run"):
            with locks.folder_lock(folder, flag="--x"):  # one process, two runs: refused
                pass
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []  # the folders it created, removed again
    kept = tmp_path / "kept"
    kept.mkdir()
    with locks.folder_lock(kept, flag="--x"):
        (kept / "results.json").write_text("{}")
    assert [p.name for p in kept.iterdir()] == ["results.json"]


# ------------------------------------------------------------------------- checkpoints


def _store(path: Path):
    from swan_jax.runs.checkpoint import CheckpointStore

    return CheckpointStore(path)


def _state(value: float) -> dict:
    return {"w": jnp.full((3, 2), value, jnp.float32), "b": jnp.arange(4, dtype=jnp.int32)}


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_last_checkpoint(
        tmp_path, monkeypatch, capfd):
    """orbax's writer fails (stubbed with the error it raises on a full disk, after leaving
    its temporary folder): one line naming the folder and what to do; the partial folder
    is removed and the earlier checkpoints are untouched."""
    import orbax.checkpoint as ocp

    from swan_jax.runs.checkpoint import CheckpointWriteError

    store = _store(tmp_path / "ck")
    store.save(1, _state(1.0), {"epoch": 1})
    store.save(2, _state(2.0), {"epoch": 2})
    real_save = ocp.CheckpointManager.save

    def disk_full(self, step, *args, **kwargs):
        partial = tmp_path / "ck" / f"{step}.orbax-checkpoint-tmp-123"
        (partial / "state").mkdir(parents=True)
        raise ValueError(ORBAX_DISK_FULL.format(path=partial / "state"))

    monkeypatch.setattr(ocp.CheckpointManager, "save", disk_full)
    capfd.readouterr()
    with pytest.raises(CheckpointWriteError) as err:
        store.save(3, _state(3.0), {"epoch": 3})
    folder = tmp_path / "ck"
    # The library names settings; the command line spells them as its flags.
    assert err.value.settings == ("checkpoint_dir", "resume")
    assert str(err.value) == (
        f"could not write the checkpoint of epoch 3 to {folder / '3'} (No space left on "
        f"device): free space there (or choose another checkpoint_dir) and run the same "
        f"command again; resume=True continues from epoch 2, kept in {folder / '2'}")
    assert command.error_message(transfer.EXPERIMENT, err.value) == (
        f"could not write the checkpoint of epoch 3 to {folder / '3'} (No space left on "
        f"device): free space there (or choose another --checkpoint-dir) and run the same "
        f"command again; --resume continues from epoch 2, kept in {folder / '2'}")
    assert sorted(p.name for p in folder.iterdir()) == ["1", "2"]
    monkeypatch.setattr(ocp.CheckpointManager, "save", real_save)
    state, meta = store.restore(_state(0.0))
    assert meta == {"epoch": 2} and float(state["w"][0, 0]) == 2.0
    store.close()
    assert "Traceback" not in capfd.readouterr().err


def _corrupt(step: Path) -> None:
    """Truncate every file of a checkpoint's array store (a disk error, a copy cut short)."""
    for f in (step / "state").rglob("*"):
        if f.is_file() and f.stat().st_size > 8:
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])


def test_a_corrupt_checkpoint_is_one_line_naming_it_and_the_one_before(tmp_path, capfd):
    from swan_jax.runs.checkpoint import CheckpointUnreadable, load_run_variables

    store = _store(tmp_path / "ck")
    store.save(1, _state(1.0), {"epoch": 1})
    store.save(2, _state(2.0), {"epoch": 2})
    _corrupt(tmp_path / "ck" / "2")
    capfd.readouterr()
    with pytest.raises(CheckpointUnreadable) as err:
        store.restore(_state(0.0))
    message = command.error_message(transfer.EXPERIMENT, err.value)  # the command line's
    assert "\n" not in message
    assert re.fullmatch(
        rf"the checkpoint {re.escape(str(tmp_path / 'ck' / '2'))} cannot be read \(.+\); it "
        r"is truncated or corrupt: delete that folder to resume from epoch 1, or pass "
        r"--overwrite \(without --resume\) to start the program again", message), message
    assert str(err.value).endswith("or pass overwrite=True (without resume=True) to start "
                                   "the program again")
    store.close()
    assert "Traceback" not in capfd.readouterr().err
    with pytest.raises(CheckpointUnreadable, match="cannot be read"):
        load_run_variables(tmp_path / "ck", key="w")


def test_the_command_line_turns_checkpoint_faults_into_one_line(tmp_path, monkeypatch):
    """What reaches `main` from the training loop (stubbed here: the loop itself is what
    the test below runs end to end) ends as its one line, exit 1."""
    from swan_jax.runs.checkpoint import CheckpointUnreadable

    def unreadable(*args, **kwargs):
        raise CheckpointUnreadable("the checkpoint X/2 cannot be read (...)")

    monkeypatch.setattr(sweep, "train", unreadable)
    argv = [*TINY_TRANSFER, "--results-dir", str(tmp_path / "res"), "--cache-dir",
            str(tmp_path / "cache"), "--resume"]
    assert str(exits(transfer.main, argv).code) == "the checkpoint X/2 cannot be read (...)"


def test_disk_full_at_the_last_save_is_one_line_and_keeps_what_was_saved(
        tmp_path, monkeypatch, capsys):
    """End to end: the full disk is one line (no orbax thread tracebacks); history.jsonl
    holds exactly the epochs of the newest kept checkpoint, which restores; no results
    file claims the program. (The retry is the Ctrl-C test's resume in test_run_failures.)
    """
    import orbax.checkpoint as ocp

    real_save = ocp.CheckpointManager.save

    def full_at_the_last_epoch(self, step, *args, **kwargs):
        if step == 3:
            raise ValueError(ORBAX_DISK_FULL.format(path=f"{self.directory}/3.tmp"))
        return real_save(self, step, *args, **kwargs)

    monkeypatch.setattr(ocp.CheckpointManager, "save", full_at_the_last_epoch)
    argv = [*TINY_TRANSFER, "--results-dir", str(tmp_path / "res"), "--cache-dir",
            str(tmp_path / "cache")]
    capsys.readouterr()
    message = str(exits(transfer.main, argv).code)
    assert "Traceback" not in capsys.readouterr().err
    [folder] = (tmp_path / "res" / "checkpoints" / "line" / "3" / "swan").iterdir()
    kept = sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())
    resume = (f"--resume continues from epoch {kept[-1]}, kept in {folder / str(kept[-1])}"
              if kept else "no earlier checkpoint is kept, so the program starts again")
    assert message == (f"could not write the checkpoint of epoch 3 to {folder / '3'} (No "
                       f"space left on device): free space there (or choose another "
                       f"--checkpoint-dir) and run the same command again; {resume}")
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    assert [h["epoch"] + 1 for h in history] == list(range(1, (kept or [0])[-1] + 1))
    if kept:
        with ocp.CheckpointManager(folder) as manager:
            meta = manager.restore(kept[-1], args=ocp.args.Composite(
                meta=ocp.args.JsonRestore()))["meta"]
        assert meta["epoch"] == kept[-1] and len(meta["history"]) == kept[-1]
    assert not (tmp_path / "res" / "results.json").exists()


def test_a_results_file_that_cannot_be_written_names_it(tmp_path, monkeypatch):
    from swan_jax.runs import io

    def full(self, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(io.OutputWriteError) as err:
        io.write_text_atomic(tmp_path / "table.md", "x")
    monkeypatch.undo()
    assert str(err.value) == (f"could not write {tmp_path / 'table.md'} (No space left on "
                              f"device): free space there or choose another folder, then run "
                              f"the same command again with resume=True")
    assert command.error_message(transfer.EXPERIMENT, err.value) == (
        f"could not write {tmp_path / 'table.md'} (No space left on device): free space "
        f"there or choose another folder, then run the same command again with --resume")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ caches


def test_a_truncated_cache_is_named_and_rebuilt(tmp_path, capsys):
    from swan_jax.data.transfer import load_transfer

    sizes = (4, 2, 2)
    first = load_transfer("line", 3, tmp_path, sizes=sizes)
    cache = sorted((tmp_path / "transfer").glob("*_train_*.npz"))[0]
    cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])
    capsys.readouterr()
    again = load_transfer("line", 3, tmp_path, sizes=sizes)
    err = capsys.readouterr().err
    assert re.fullmatch(rf"cache {re.escape(str(cache))} is unreadable \(\w+: .*\); "
                        r"rebuilding it\n", err), err
    np.testing.assert_array_equal(again["train"].nodes, first["train"].nodes)
    np.testing.assert_array_equal(again["train"].senders, first["train"].senders)
    load_transfer("line", 3, tmp_path, sizes=sizes)  # rebuilt: read quietly now
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- figures


def test_a_figure_that_fails_is_a_warning(tmp_path, capsys):
    """The drawing itself (`Experiment.plot`) fails after writing half a file: one warning
    line, no half-written PNG, False; the run goes on (end to end: the resume in
    test_run_failures' Ctrl-C test draws with a failing figure and exits 0)."""

    class Failing:
        def plot(self, cells, path):
            path.write_bytes(b"\x89PNG half")
            raise OSError(28, "No space left on device")

    png = tmp_path / "transfer.png"
    assert report.draw_figure(Failing(), _cells(), png) is False
    assert capsys.readouterr().err == (
        f"warning: the figure {png} was not written (OSError: [Errno 28] No space left on "
        f"device); the results beside it are complete, and the same command with --resume "
        f"draws it again without training\n")
    assert not png.exists()


def _cells() -> list[dict]:
    return [{"topology": "line", "distance": k, "model": "swan", "metric": "mse",
             "test_mean": 0.1 * k, "test_std": 0.01, "paper": [0.2, 0.02]} for k in (3, 5)]


def test_library_figures_leave_the_sessions_matplotlib_backend_alone(tmp_path):
    """A notebook's backend stays what it was (was: switched to Agg for the process), no
    pyplot figure is left open, and the PNGs are written all the same."""
    import matplotlib
    import matplotlib.pyplot as plt

    before = matplotlib.get_backend()
    matplotlib.use("svg")  # stands in for a notebook's inline backend
    try:
        assert report.plot_against_paper(transfer.EXPERIMENT, _cells(), tmp_path / "a.png")
        assert transfer.plot_distances(_cells(), tmp_path / "b.png")
        run = tmp_path / "runs" / "p"
        run.mkdir(parents=True)
        (run / "history.jsonl").write_text("".join(
            json.dumps({"epoch": e, "train_loss": [1.0 / (e + 1)], "val": [0.5], "lr": [1e-3]})
            + "\n" for e in range(3)))
        report.plot_curves(tmp_path / "runs", tmp_path / "c.png")
        assert matplotlib.get_backend() == "svg"
        assert plt.get_fignums() == []
    finally:
        matplotlib.use(before)
    for name in ("a.png", "b.png", "c.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------------------ signals


def test_sigterm_is_handled_like_ctrl_c_with_a_resume_command_runnable_as_printed(tmp_path):
    """SIGTERM (a batch system's stop) while the sweep works: exit 143 with the same
    message as Ctrl-C; the resume command names this interpreter, so it runs as printed
    from a shell without the environment (here: PATH without it, another folder)."""
    started = tmp_path / "started"
    argv = [*TINY_TRANSFER, "--results-dir", str(tmp_path / "res"), "--cache-dir",
            str(tmp_path / "cache")]
    child = _python(f"""
        import pathlib, time
        from swan_jax.experiments import sweep, transfer

        def slow_train(*args, **kwargs):
            pathlib.Path({str(started)!r}).touch()
            time.sleep(600)

        sweep.train = slow_train
        transfer.main({argv!r})
        """)
    _wait_for(started, child, "training")
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert f"interrupted by SIGTERM between epochs; no program has finished yet " \
           f"({tmp_path / 'res' / 'results.json'} is written when one does).\n" in err
    command = re.search(r"resume with: (.*)", err).group(1)
    assert command == shlex.join([sys.executable, "-m", "swan_jax.experiments.transfer",
                                  *argv, "--resume"])
    bare = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    bare["PATH"] = "/usr/bin:/bin"
    shown = subprocess.run([*shlex.split(command), "--help"], cwd=tmp_path, env=bare,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0 and "--resume" in shown.stdout, shown.stderr


def test_an_interrupt_is_honoured_within_seconds_while_a_compiled_step_runs(tmp_path):
    """The main thread is inside XLA (a loop of ~minutes), where Python cannot run its
    handler: the watchdog prints the message and ends the process with 128 + the signal."""
    started = tmp_path / "started"
    child = _python(f"""
        import pathlib
        import jax
        from swan_jax.experiments import signals

        spin = jax.jit(lambda x: jax.lax.fori_loop(0, 2_000_000_000, lambda i, v: v * 1.0000001
                                                   + 1e-9, x))
        spin.lower(1.0).compile()
        with signals.interrupts_like_ctrl_c(lambda: "stuck: resume with: X", grace=2.0):
            pathlib.Path({str(started)!r}).touch()
            print(float(spin(1.0)), flush=True)  # never reached
        """)
    _wait_for(started, child, "the compiled loop")
    time.sleep(1.0)  # inside XLA by now
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=240)
    assert child.returncode == 128 + signal.SIGINT, err
    assert err.strip().splitlines()[-1] == "stuck: resume with: X"
    assert out == ""


# --------------------------------------------------------------------- implicit solvers


def test_implicit_solvers_refuse_a_state_too_large_for_their_jacobian_before_compiling():
    import swan_jax as sj
    from swan_jax.solvers import MAX_IMPLICIT_STATE, SolverTooLarge
    from tests.graphs import random_undirected

    cfg = sj.SWANConfig(num_layers=2)
    rng = np.random.default_rng(0)
    graph = random_undirected(rng, 300)
    params = sj.init_params(__import__("jax").random.PRNGKey(0), 20, cfg)
    x0 = jnp.asarray(rng.normal(size=(300, 20)), jnp.float32)
    assert 300 * 20 > MAX_IMPLICIT_STATE
    with pytest.raises(SolverTooLarge) as err:
        sj.solve(params, graph, x0, cfg, solver="kvaerno5")
    assert str(err.value) == (
        "solver 'kvaerno5' is implicit: its gradient solves with the dense Jacobian of the "
        "whole state at every stage, here 300 nodes x 20 channels = 6,000 numbers, a "
        "[6,000, 6,000] matrix (0.1 GiB per run) built from 6,000 evaluations of the field; "
        "implicit solvers take states of at most 4,096 numbers (204 nodes at this width): "
        "use an explicit solver ('tsit5', 'dopri5', 'bosh3', or the fixed-step 'euler', "
        "'heun') or fewer nodes per batch (a smaller batch_size)")
    # Out of steps on this state: the advice names only what runs on it.
    with pytest.raises(sj.SolverError) as err:
        sj.solve(params, graph, x0, cfg, solver="tsit5", rtol=1e-10, atol=1e-10, max_steps=1)
    first = str(err.value).splitlines()[0]
    assert first.endswith("or try a fixed-step solver such as 'euler' or 'heun'")
    assert "kvaerno" not in first


def test_a_tiny_implicit_training_runs_from_the_command(tmp_path):
    """Issue 47: a small implicit run trains (its stages solved Jacobian-free) instead of
    never finishing its first epoch: one layer (line/1), kvaerno3, cheap to compile."""
    res = tmp_path / "res"
    argv = [*TINY_TRANSFER, "--distance", "1", "--solver", "kvaerno3", "--hidden", "4",
            "--epochs", "2", "--seeds", "0", "--results-dir", str(res), "--cache-dir",
            str(tmp_path / "c")]
    assert transfer.main(argv) == 0
    cell, = json.loads((res / "results.json").read_text())["cells"]
    assert cell["epochs_completed"] == 2 and np.isfinite(cell["test_mean"])


def test_an_implicit_solver_too_large_for_the_batch_is_one_line_from_the_command(tmp_path):
    argv = [*TINY_TRANSFER, "--solver", "kvaerno5", "--hidden", "256", "--results-dir",
            str(tmp_path / "res"), "--cache-dir", str(tmp_path / "cache")]
    message = str(exits(transfer.main, argv).code)
    # refused at plan time, before any data is loaded (issue 47: the batch size that fits)
    assert re.fullmatch(r"line/3/swan/\S+: solver 'kvaerno5' is implicit .* a batch of 8 "
                        r"graph\(s\) of up to 4 nodes x 256 channels pads to 16,384 numbers: "
                        r"even one graph is too large at this width; lower --hidden, or use "
                        r"an explicit solver .*", message), message
    assert not (tmp_path / "res" / "results.json").exists()
