"""The training loop: batching, losses, vmapped runs, resume, divergence, budgets."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import swan_jax as sj
from swan_jax.compiles import CompileCounter
from swan_jax.data.batching import budget_for, iterate_batches
from swan_jax.losses import weighted_cross_entropy
from swan_jax.train import TrainConfig, TrainingDiverged, _run_blocks, train
from tests import train_script
from tests.train_script import GRID, line_swap_dataset, model_fn, splits

ROOT = Path(__file__).resolve().parents[1]


def test_batches_have_one_shape_cover_every_graph_once_and_mask_padding():
    data = line_swap_dataset(num_graphs=23)
    budget = budget_for(data, 5)
    seen, shapes = [], set()
    for batch in iterate_batches(data, 5, budget, np.random.default_rng(0)):
        shapes.add((batch.graph.nodes.shape, batch.graph.senders.shape, batch.graph.n_node.shape))
        real = int(batch.graph_mask.sum())
        assert real <= 5
        assert batch.node_mask.sum() == batch.graph.n_node[:real].sum()
        assert np.all(batch.graph.n_node[real + 1:] == 0)
        # Padding edges stay on padding nodes.
        pad_edges = slice(int(batch.graph.n_edge[:real].sum()), None)
        assert np.all(~batch.node_mask[batch.graph.senders[pad_edges]])
        seen.extend(batch.node_targets[batch.node_mask][:, 0].tolist())
    assert len(shapes) == 1
    assert sorted(seen) == sorted(data.node_targets[:, 0].tolist())


def test_open_program_is_train_before_its_epochs():
    """`train.open_program` (what benchmarks/epoch_anatomy.py times part by part) sets up
    what `train` does: its pipeline's first epoch gives `train`'s first-epoch losses."""
    from swan_jax.train import open_program

    data = splits(line_swap_dataset(num_graphs=16))
    cfg = TrainConfig(epochs=1, batch_size=4, seeds=(0, 1), progress=False, track_test=False)
    prog, state = open_program(model_fn, data, cfg, GRID)
    assert state.num_runs == 4 and set(prog.data) == {"train", "val", "test"}
    _, losses = prog.pipeline.train_epoch(state, prog.hp, 0, lambda n: None)
    assert np.asarray(losses).shape == (prog.pipeline.steps(0), 4)
    result = train(model_fn, data, cfg, GRID)
    np.testing.assert_allclose(np.mean(losses, axis=0), result.history[0]["train_loss"],
                               rtol=1e-6)


def test_weighted_cross_entropy_matches_lrgb_formula():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(7, 3)).astype(np.float32)
    labels = np.array([0, 0, 0, 1, 1, 2, 1])
    mask = np.array([1, 1, 1, 1, 1, 0, 0], bool)  # class 2 only on padding
    got = float(weighted_cross_entropy(jnp.asarray(logits), jnp.asarray(labels), jnp.asarray(mask)))
    real_logits, real_labels = logits[mask], labels[mask]
    counts = np.bincount(real_labels, minlength=3)
    weight = (len(real_labels) - counts) / len(real_labels) * (counts > 0)
    logp = real_logits - np.log(np.exp(real_logits).sum(1, keepdims=True))
    nll = -logp[np.arange(len(real_labels)), real_labels]
    want = np.sum(weight[real_labels] * nll) / np.sum(weight[real_labels])
    assert got == pytest.approx(want, rel=1e-5)


def test_vmapped_runs_equal_runs_one_by_one_and_compile_only_in_the_first_epoch():
    data = splits(line_swap_dataset())
    per_epoch = []
    with CompileCounter() as counter:
        cfg = TrainConfig(epochs=3, batch_size=4, seeds=(0, 1), progress=False,
                          on_epoch_end=lambda epoch, record: per_epoch.append(
                              counter.snapshot()))
        together = train(model_fn, data, cfg, GRID)
    # Fixed padded shapes: epochs 2 and 3 trace and compile nothing new.
    assert per_epoch[0]["compiles"] > 0
    # The initialisation (Flax's init traces the forward pass) is traced once: its shapes,
    # checked before anything compiles, come from the trace the call then uses.
    assert [name for name in counter.traced if name.startswith("init")] == ["init_one"]
    assert per_epoch[2] == per_epoch[0]
    # Run 3 is (second grid point, seed 1): the far corner of the stacked axis.
    alone = train(model_fn, data, TrainConfig(epochs=3, batch_size=4, seeds=(1,),
                                              progress=False), GRID[1:])
    np.testing.assert_allclose([h["train_loss"][3] for h in together.history],
                               [h["train_loss"][0] for h in alone.history], rtol=1e-5)
    assert together.runs[3]["test"] == pytest.approx(alone.runs[0]["test"], rel=1e-4)
    assert together.runs[3]["test"] != together.runs[0]["test"]


def test_a_cpu_runs_a_grid_over_a_large_batch_one_run_at_a_time(monkeypatch):
    def scanned(runs: int, shared_floats: int) -> bool:
        fn = _run_blocks.in_blocks(jax.vmap(lambda p, x: p * x, in_axes=(0, None)),
                                   (True, False), None)
        jaxpr = jax.make_jaxpr(fn)(jnp.ones((runs, 3)), jnp.ones((shared_floats, 3)))
        return "scan" in str(jaxpr)

    monkeypatch.setattr(_run_blocks, "CPU_ONE_AT_A_TIME_BYTES", 4 * 3 * 100)
    assert scanned(4, 100) and not scanned(4, 99) and not scanned(1, 100)
    # A grid trained so (the tiny batch made "large") gives each run the lone run's
    # numbers: the same width-1 program, up to how XLA simplifies Adam in each.
    monkeypatch.setattr(_run_blocks, "CPU_ONE_AT_A_TIME_BYTES", 0)
    data = splits(line_swap_dataset())
    together = train(model_fn, data, TrainConfig(epochs=2, batch_size=4, seeds=(0, 1),
                                                 progress=False), GRID)
    alone = train(model_fn, data, TrainConfig(epochs=2, batch_size=4, seeds=(1,),
                                              progress=False), GRID[1:])
    np.testing.assert_allclose([h["train_loss"][3] for h in together.history],
                               [h["train_loss"][0] for h in alone.history], rtol=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves(together.best_params),
                    jax.tree_util.tree_leaves(alone.best_params), strict=True):
        np.testing.assert_allclose(np.asarray(a)[3], np.asarray(b)[0], rtol=1e-6)


def test_a_cpu_computes_no_stopped_run(monkeypatch):
    """Each computed run calls the callback once; a stopped one (`active` False) gives
    `idle`'s outputs. One at a time, stopped runs are never computed; all at once, they
    are while more than half the runs train."""
    calls: list[int] = []

    def fn(p, x, active):
        jax.debug.callback(lambda v: calls.append(int(v)), p[0])
        return p * x, jnp.sum(p * x)

    def idle(p, x, active):
        return p, jnp.full(active.shape, jnp.nan)

    p, x = jnp.arange(6.0).reshape(3, 2), jnp.full(2, 2.0)
    for threshold in (1 << 20, 0):
        monkeypatch.setattr(_run_blocks, "CPU_ONE_AT_A_TIME_BYTES", threshold)
        f = jax.jit(_run_blocks.by_device(jax.vmap(fn, in_axes=(0, None, 0)),
                                          (True, False, True),
                                          stoppable=_run_blocks.Stoppable(2, idle)))
        for active in ([True] * 3, [True, False, True], [False, False, True], [False] * 3):
            calls.clear()
            out, total = f(p, x, jnp.asarray(active))
            jax.effects_barrier()
            # vmapped, a stopped run is computed: the real step keeps its state itself
            computed = np.asarray(active) | (threshold > 0 and sum(active) > 1)
            assert sorted(calls) == [2 * r for r in range(3) if computed[r]]
            np.testing.assert_array_equal(out, np.where(np.c_[computed], p * 2, p))
            np.testing.assert_array_equal(total, np.where(computed, [2.0, 10.0, 18.0],
                                                          np.nan))


def test_a_stopped_run_is_skipped_and_its_loss_is_nan(monkeypatch, capsys):
    """Runs that stop early at different epochs: skipping their steps changes no run's
    epochs or scores (the training runs' steps are computed one at a time then: rounding
    only); a stopped run's training loss is NaN from its stop, skipped or computed, the
    same before; the epoch lines show the training runs' mean loss. A short program asks
    for no skip (its second compiled branch would not pay)."""
    from swan_jax.train import _placement

    asked = []

    def spy(fn, runs, *, stoppable=None):
        asked.append(stoppable is not None)
        return _run_blocks.by_device(fn, runs, stoppable=stoppable)

    monkeypatch.setattr(_placement, "by_device", spy)
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=_run_blocks.MIN_SKIP_EPOCHS, batch_size=4, seeds=(0, 1),
                      patience=3, learning_rate=3e-2, progress=False)
    train(model_fn, data, dataclasses.replace(cfg, epochs=cfg.epochs - 1), GRID)
    assert asked and not any(asked)  # the step and the prediction: no skip
    results = {}
    for skip in (True, False):
        monkeypatch.setattr(_run_blocks, "SKIP_STOPPED", skip)
        capsys.readouterr()
        asked.clear()
        results[skip] = train(model_fn, data, cfg, GRID)
        assert sorted(asked) == [False, True]  # the prediction, the step
        losses = re.findall(r"^epoch \d+/\d+  loss (\S+)", capsys.readouterr().err, re.M)
        assert len(losses) == len(results[skip].history) and "nan" not in losses
    skipped, computed = results[True], results[False]
    epochs = [run["epochs_run"] for run in skipped.runs]
    assert len(set(epochs)) > 1 and max(epochs) < cfg.epochs  # they stop, not together
    assert epochs == [run["epochs_run"] for run in computed.runs]
    for a, b in zip(skipped.runs, computed.runs, strict=True):
        assert a["test"] == pytest.approx(b["test"], rel=1e-5)
    for r, stop in enumerate(epochs):
        ours = [h["train_loss"][r] for h in skipped.history]
        theirs = [h["train_loss"][r] for h in computed.history]
        np.testing.assert_allclose(ours[:stop], theirs[:stop], rtol=1e-5)
        assert np.isnan(ours[stop:] + theirs[stop:]).all()


def test_the_model_is_traced_once_to_initialise_and_once_per_batch_shape(monkeypatch):
    """The memory check, the training step and the evaluation share one trace of the
    model (`Placement.model_apply`; here every batch has one shape), and the
    initialisation traces it without its ODE solve (`models.parameters_only`)."""
    import swan_jax.models as models

    data = splits(line_swap_dataset())
    built, solved, solve = [], [], models.solve

    def counted_model_fn(hp):
        built.append(hp)
        return model_fn(hp)

    def counted_solve(*args, **kwargs):
        solved.append(1)
        return solve(*args, **kwargs)

    monkeypatch.setattr(models, "solve", counted_solve)
    for pipeline in ("device", "host"):
        built.clear(), solved.clear()
        train(counted_model_fn, data, TrainConfig(epochs=2, batch_size=4, seeds=(0, 1),
                                                  progress=False, pipeline=pipeline), GRID)
        assert (len(built), len(solved)) == (2, 1), pipeline


def _run_script(tmp, name, epochs, resume=False):
    out = tmp / f"{name}.json"
    cmd = [sys.executable, "-m", "tests.train_script", str(tmp / f"ck_{name}"), str(out),
           str(epochs)] + (["--resume"] if resume else [])
    return cmd, out


def test_resume_after_sigkill_is_bit_identical(tmp_path):
    epochs = 8
    # The uninterrupted reference is the script's own `main`, run in this process (same
    # settings, environment and compilation cache as the script's processes): only the
    # killed run and its resume need processes of their own, and a third interpreter
    # start-up cost seconds. A reference that differed from a fresh process would fail.
    _, full_out = _run_script(tmp_path, "full", epochs)
    train_script.main([str(tmp_path / "ck_full"), str(full_out), str(epochs)])
    cmd, out = _run_script(tmp_path, "killed", epochs)
    proc = subprocess.Popen(cmd, cwd=ROOT)
    ck = tmp_path / "ck_killed"
    deadline = time.time() + 240
    # Kill it as soon as a second epoch's checkpoint exists: mid-way through the run.
    while time.time() < deadline and proc.poll() is None:
        steps = [p for p in ck.glob("*") if p.name.isdigit()] if ck.exists() else []
        if any(int(p.name) >= 2 for p in steps):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    cmd, out = _run_script(tmp_path, "killed", epochs, resume=True)
    subprocess.run(cmd, check=True, cwd=ROOT, timeout=300)
    full, resumed = json.loads(full_out.read_text()), json.loads(out.read_text())
    assert resumed["runs"] == full["runs"]
    assert resumed["history"] == full["history"]
    assert resumed["params"] == full["params"]


def test_existing_checkpoints_need_resume_and_matching_config(tmp_path):
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=1, batch_size=4, checkpoint_dir=str(tmp_path), progress=False)
    train(model_fn, data, cfg, GRID[:1])
    with pytest.raises(ValueError, match="already holds checkpoints: pass resume"):
        train(model_fn, data, cfg, GRID[:1])
    other = TrainConfig(epochs=2, batch_size=4, checkpoint_dir=str(tmp_path), resume=True,
                        progress=False, learning_rate=0.5)
    with pytest.raises(ValueError, match="belongs to another configuration"):
        train(model_fn, data, other, GRID[:1])


def test_fingerprint_of_a_saved_program_does_not_move():
    """A checkpoint written before a later TrainConfig field stays resumable: this is the
    fingerprint a Peptides-func SWAN-learn program wrote on 2026-11-28 (CPU bundle, epoch
    53), before `shard_runs` existed; adding that field to the identity orphaned it."""
    from swan_jax.train._folder import accepted_fingerprints, fingerprint

    cfg = TrainConfig(batch_size=64, optimizer="adamw", learning_rate=0.001,
                      weight_decay=0.0, loss="bce", metric="ap", task_level="graph",
                      seeds=(0, 1, 2), max_params=500000, on_divergence="stop_run")
    point = {"learning_rate": 0.001, "weight_decay": 0.0, "epsilon": 1.0, "gamma": 0.1,
             "beta": 1.0}
    runs = [(point, seed) for seed in (0, 1, 2)]
    assert fingerprint(cfg, runs, {"program": "1c14b83717"}) == "774d20f04d93ec4e"
    # placement is not identity; a setting that decides the numbers still is
    sharded = TrainConfig(**{**cfg.__dict__, "shard_runs": True})
    assert fingerprint(sharded, runs, {"program": "1c14b83717"}) == "774d20f04d93ec4e"
    other = TrainConfig(**{**cfg.__dict__, "batch_size": 32})
    assert fingerprint(other, runs, {"program": "1c14b83717"}) != "774d20f04d93ec4e"
    # Format 1 (no number) also takes what the code with `shard_runs` in the identity
    # wrote for this program (computed with that code); format 3 hashes as 2 does.
    assert accepted_fingerprints(cfg, runs, {"program": "1c14b83717"}) == {
        3: ("774d20f04d93ec4e",), 2: ("774d20f04d93ec4e",),
        1: ("774d20f04d93ec4e", "9bdeff0016665965")}


def _rewrite_fingerprint(epoch_folder: Path, value: str, fmt: int | None) -> None:
    """Give a saved checkpoint's JSON metadata another fingerprint and format (None: no
    number, as code before the format number wrote)."""
    (meta,) = [f for f in (epoch_folder / "meta").iterdir() if f.is_file()
               and "fingerprint" in f.read_text()]
    payload = json.loads(meta.read_text())
    payload["fingerprint"] = value
    payload.pop("fingerprint_format", None)
    if fmt is not None:
        payload["fingerprint_format"] = fmt
    meta.write_text(json.dumps(payload))


def adgn_model_fn(hp):
    """`model_fn` with adgn's block: a model swan-jax 0.1.0's formation did not change."""
    cfg = sj.SWANConfig(variant="adgn", num_layers=3, epsilon=hp["epsilon"], beta=hp["beta"])
    return sj.Model(sj.LinearEncoder(8), sj.SWANBlock(cfg), sj.NodeReadout((1,)))


def test_a_folder_written_with_the_older_fingerprint_resumes(tmp_path):
    """Checkpoints without a fingerprint format number (format 1) resume under either form
    that older code wrote, `shard_runs` in the identity or not, and are saved anew under
    today's format and fingerprint; a numbered checkpoint resumes under its own format's
    fingerprint only, and an unknown format or any other fingerprint is refused. (An adgn
    model: the formation of V', Z' that formats 1 and 2 knew leaves its function as it
    was; `test_a_checkpoint_of_the_old_formation_...` refuses the others.)"""
    from swan_jax.runs.checkpoint import CheckpointStore
    from swan_jax.train._folder import (
        FINGERPRINT_FORMAT,
        RUN_FILE,
        UNNUMBERED_FORMAT,
        accepted_fingerprints,
        fingerprint,
    )

    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=1, batch_size=4, checkpoint_dir=str(tmp_path), progress=False)
    train(adgn_model_fn, data, cfg, GRID[:1])
    meta = json.loads((tmp_path / RUN_FILE).read_text())
    runs = [(dict(r["hparams"]), r["seed"]) for r in meta["runs"]]
    extra = None
    assert meta["fingerprint"] == fingerprint(cfg, runs, extra)
    accepted = accepted_fingerprints(cfg, runs, extra)
    assert accepted[FINGERPRINT_FORMAT] == (meta["fingerprint"],)
    (old,) = set(accepted[UNNUMBERED_FORMAT]) - {meta["fingerprint"]}
    assert old == fingerprint(cfg, runs, extra, also={"shard_runs": False})

    def latest() -> Path:
        return tmp_path / str(CheckpointStore(tmp_path).latest_epoch())

    def resume(epochs: int):
        more = TrainConfig(epochs=epochs, batch_size=4, checkpoint_dir=str(tmp_path),
                           resume=True, progress=False)
        return train(adgn_model_fn, data, more, GRID[:1])

    _rewrite_fingerprint(latest(), old, None)
    assert len(resume(2).history) == 2
    saved = next(f for f in (latest() / "meta").iterdir() if "fingerprint" in f.read_text())
    assert json.loads(saved.read_text())["fingerprint_format"] == FINGERPRINT_FORMAT
    _rewrite_fingerprint(latest(), meta["fingerprint"], None)
    assert len(resume(3).history) == 3
    _rewrite_fingerprint(latest(), meta["fingerprint"], 2)
    assert len(resume(4).history) == 4
    refused = [(old, FINGERPRINT_FORMAT, "belongs to another configuration"),
               ("0123456789abcdef", None, "belongs to another configuration"),
               (meta["fingerprint"], FINGERPRINT_FORMAT + 1, "fingerprint format")]
    for value, fmt, message in refused:
        _rewrite_fingerprint(latest(), value, fmt)
        with pytest.raises(ValueError, match=message):
            resume(5)

def gcn_model_fn(hp):
    """A baseline without a SWAN block (the formation of V', Z' never reaches it)."""
    del hp
    return sj.Model(sj.LinearEncoder(8), sj.MPNNStack("gcn", 8, 1), sj.NodeReadout((1,)))


def beta0_model_fn(hp):
    """swan-beta0: no Psi, so no `Z`; only its declared config says Phi is V - V^T."""
    cfg = sj.SWANConfig(variant="swan-beta0", num_layers=3, epsilon=hp["epsilon"],
                        beta=hp["beta"])
    return sj.Model(sj.LinearEncoder(8), sj.SWANBlock(cfg), sj.NodeReadout((1,)))


@pytest.mark.parametrize("fn,changed", [(model_fn, True), (beta0_model_fn, True),
                                        (gcn_model_fn, False)])
def test_a_checkpoint_of_the_old_formation_resumes_only_a_model_it_does_not_change(
        tmp_path, fn, changed):
    """A checkpoint of fingerprint format 1 or 2 (swan-jax 0.1.0's V - V^T, Z + Z^T) of a
    SWAN model with Psi or an antisymmetric Phi is refused in one line naming 0.1.0 and
    both ways forward; a baseline's resumes as before."""
    from swan_jax.models.formation import OldFormation
    from swan_jax.runs.checkpoint import CheckpointStore, load_run_variables
    from swan_jax.train import CheckpointConflict
    from swan_jax.train._folder import RUN_FILE

    data = splits(line_swap_dataset())
    grid = GRID[:1] if fn is not gcn_model_fn else ({},)
    train(fn, data, TrainConfig(epochs=1, batch_size=4, checkpoint_dir=str(tmp_path),
                                progress=False), grid)
    value = json.loads((tmp_path / RUN_FILE).read_text())["fingerprint"]
    more = TrainConfig(epochs=2, batch_size=4, checkpoint_dir=str(tmp_path), resume=True,
                       progress=False)
    for fmt in (2, None):
        _rewrite_fingerprint(tmp_path / str(CheckpointStore(tmp_path).latest_epoch()),
                             value, fmt)
        if not changed:
            assert len(train(fn, data, more, grid).history) == more.epochs
            more = dataclasses.replace(more, epochs=more.epochs + 1)
            continue
        with pytest.raises(CheckpointConflict) as err:
            train(fn, data, more, grid)
        assert str(err.value) == (
            f"checkpoint in {tmp_path} was trained by swan-jax 0.1.0, whose field formed "
            f"V - V^T and Z + Z^T from the full raw V, Z; today's forms them from their "
            f"triangles, so its parameters are another model: finish it with the "
            f"swan-jax 0.1.0 that wrote it, or start it again in a fresh directory or "
            f"drop resume=True")
    # Opened for analysis without its model: a baseline's as it is, a SWAN model's refused
    _rewrite_fingerprint(tmp_path / str(CheckpointStore(tmp_path).latest_epoch()), value, 2)
    if changed:
        with pytest.raises(OldFormation, match="pass model="):
            load_run_variables(tmp_path)
    else:
        assert set(load_run_variables(tmp_path)["params"]) == {"encoder", "processor",
                                                                "readout"}


def test_divergence_names_epoch_step_and_config_and_keeps_checkpoint(tmp_path):
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=6, batch_size=4, checkpoint_dir=str(tmp_path), progress=False)
    grid = [{"epsilon": 0.5, "beta": 1.0, "learning_rate": 1e30}]
    with pytest.raises(TrainingDiverged, match=r"epoch \d+, step \d+ for run 0 \(seed 0, "
                                               r"\{'epsilon': 0.5, 'beta': 1.0") as err:
        train(model_fn, data, cfg, grid)
    epoch = int(str(err.value).split("epoch ")[1].split(",")[0])
    if epoch > 0:  # the epochs before the divergence stay on disk
        assert (tmp_path / str(epoch)).exists()
    assert not (tmp_path / str(epoch + 1)).exists()


def test_divergence_can_stop_one_run_of_a_grid():
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=4, batch_size=4, progress=False, on_divergence="stop_run")
    grid = [{"epsilon": 0.1, "beta": 1.0, "learning_rate": 1e-3},
            {"epsilon": 0.5, "beta": 1.0, "learning_rate": 1e30}]
    result = train(model_fn, data, cfg, grid)
    assert not result.runs[0]["diverged"] and result.runs[1]["diverged"]
    assert np.isfinite(result.runs[0]["test"])


def test_parameter_budget_is_enforced_before_training():
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=1, batch_size=4, max_params=100, progress=False)
    with pytest.raises(ValueError, match=r"parameters, over the budget of 100"):
        train(model_fn, data, cfg, GRID[:1])


@pytest.mark.parametrize("kwargs,message", [
    ({"seeds": ()}, "at least one seed"),
    ({"epochs": 0}, "epochs must be >= 1"),
    ({"loss": "hinge"}, "unknown loss 'hinge'; valid losses: mse"),
    ({"metric": "auc"}, "unknown metric 'auc'"),
])
def test_bad_train_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_flax_model_vmaps_over_grid_of_traced_epsilon():
    # The same compiled program serves every epsilon: one trace, many values.
    import jax

    data = splits(line_swap_dataset())
    batch = next(iterate_batches(data["train"], 4, budget_for(data["train"], 4)))
    traces = []

    def apply(eps):
        traces.append(1)
        net = model_fn({"epsilon": eps, "beta": 1.0})
        params = net.init(jax.random.PRNGKey(0), batch.graph)
        return net.apply(params, batch.graph)

    out = jax.jit(jax.vmap(apply))(jnp.asarray([0.1, 0.2, 0.3]))
    assert len(traces) == 1 and out.shape[0] == 3
    assert not np.allclose(out[0], out[2])
    assert sj.SWANConfig(epsilon=0.1).epsilon == 0.1


# --- optimisers: schedules and clipping, per run ------------------------------------


def test_cosine_schedule_warms_up_then_decays_to_zero():
    from swan_jax.train import schedule_scale

    cfg = TrainConfig(epochs=10, schedule="cosine", warmup_epochs=3)
    scales = [schedule_scale(cfg, e) for e in range(10)]
    assert scales[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert all(a > b for a, b in zip(scales[3:], scales[4:], strict=False))
    assert scales[-1] == pytest.approx(0.5 * (1 + np.cos(np.pi * 6 / 7)), rel=1e-5)
    assert schedule_scale(TrainConfig(epochs=10), 7) == 1.0


def test_schedules_reach_every_run_and_reduce_on_plateau_halves_the_rate():
    data = splits(line_swap_dataset())
    grid = [{**GRID[0], "learning_rate": 1e-3}, {**GRID[0], "learning_rate": 4e-3}]
    # A threshold no improvement reaches: after the first epoch every epoch is a plateau.
    cfg = TrainConfig(epochs=4, batch_size=4, progress=False, schedule="plateau",
                      plateau_patience=1, plateau_threshold=1e9, plateau_factor=0.5)
    result = train(model_fn, data, cfg, grid)
    lr = np.asarray([h["lr"] for h in result.history])  # [epochs, runs]
    np.testing.assert_allclose(lr[:, 0], [1e-3, 1e-3, 5e-4, 2.5e-4], rtol=1e-6)
    np.testing.assert_allclose(lr[:, 1], 4 * lr[:, 0], rtol=1e-6)
    cosine = train(model_fn, data, TrainConfig(epochs=3, batch_size=4, progress=False,
                                               schedule="cosine", warmup_epochs=1), grid)
    np.testing.assert_allclose([h["lr"][1] for h in cosine.history],
                               [2e-3, 4e-3, 2e-3], rtol=1e-6)


def test_gradient_clipping_is_a_per_run_hyper_parameter():
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=2, batch_size=4, progress=False)
    grid = [{**GRID[0], "grad_clip": 1e-9}, {**GRID[0], "grad_clip": 1e3}]
    clipped = np.asarray([h["train_loss"] for h in train(model_fn, data, cfg, grid).history])
    free = np.asarray([h["train_loss"][0] for h in train(model_fn, data, cfg,
                                                         GRID[:1]).history])
    # A bound the gradients never reach changes nothing; a tiny one does (Adam rescales
    # gradients, but not ones far below its epsilon).
    np.testing.assert_allclose(clipped[:, 1], free, rtol=1e-6)
    assert abs(clipped[-1, 0] - free[-1]) > 1e-3 * abs(free[-1])
    # The configuration's bound applies when the grid names none.
    both = train(model_fn, data, TrainConfig(epochs=2, batch_size=4, progress=False,
                                             grad_clip=1e-9), GRID[:1])
    np.testing.assert_allclose([h["train_loss"][0] for h in both.history], clipped[:, 0],
                               rtol=1e-6)


# --- failures a user can cause (tests/BAD_INPUTS.md, section 9) ------------------------


class _BlowUp:
    """A model whose predictions are infinite on nodes with a feature above 10 (validation)."""

    def __call__(self, hp):
        import flax.linen as nn

        class Model(nn.Module):
            @nn.compact
            def __call__(self, graph):
                nodes = graph.nodes
                return nn.Dense(1)(nodes) + jnp.where(nodes > 10, jnp.inf, 0.0)

        return Model()


def test_non_finite_predictions_in_evaluation_are_divergence(tmp_path):
    data = splits(line_swap_dataset())
    data["val"].nodes[0, 0] = 100.0  # finite input, infinite prediction
    cfg = TrainConfig(epochs=3, batch_size=4, checkpoint_dir=str(tmp_path), progress=False)
    with pytest.raises(TrainingDiverged, match=r"non-finite predictions on the val split at "
                                               r"epoch 0 for run 0 \(seed 0, \{\}\); the last "
                                               r"good checkpoint \(epoch -1\) is kept in "):
        train(_BlowUp(), data, cfg)
    assert not (tmp_path / "1").exists()  # the diverged epoch was not checkpointed
    stop = train(_BlowUp(), data, TrainConfig(epochs=2, batch_size=4, progress=False,
                                              on_divergence="stop_run"))
    assert stop.runs[0]["diverged"] and stop.runs[0]["epochs_run"] == 1


def test_a_batch_larger_than_the_split_is_capped_and_said_once(capsys):
    data = splits(line_swap_dataset())  # 16 training graphs
    big = train(model_fn, data, TrainConfig(epochs=2, batch_size=100_000_000, progress=False,
                                            description="big"), GRID[:1])
    out = capsys.readouterr().out
    assert out.count("big: batch size 100000000 exceeds the 16 training graph(s); "
                     "using 16") == 1
    exact = train(model_fn, data, TrainConfig(epochs=2, batch_size=16, progress=False,
                                              description="big"), GRID[:1])
    assert big.runs == exact.runs


def test_a_step_that_cannot_fit_in_free_memory_is_refused_before_compiling(monkeypatch):
    from swan_jax.train import StepTooLarge, _memory

    data = splits(line_swap_dataset())
    monkeypatch.setattr(_memory, "free_memory_bytes", lambda: 20_000)
    with CompileCounter() as counter:
        with pytest.raises(StepTooLarge, match=r"a training step needs about [\d.]+ GiB \(batch "
                                               r"budget .*, batch_size=16\) but only [\d.]+ "
                                               r"GiB are free; batch_size=\d+ should fit") as err:
            train(model_fn, data, TrainConfig(epochs=1, batch_size=16, progress=False), GRID)
    # The command line spells the same settings as its flags.
    from swan_jax.experiments import command, transfer

    assert re.search(r", --batch-size 16\) but only [\d.]+ GiB are free; --batch-size \d+ "
                     r"should fit$", command.error_message(transfer.EXPERIMENT, err.value))
    # A fresh process compiles a few eager helpers (placing arrays, dtype conversions) on
    # its first batch; what must not compile is initialisation, the step or prediction.
    # (the device pipeline's step and prediction are `_train_chunk` and `_eval_split`;
    # a long run's fused epochs, `_epochs`, must not compile either)
    program = {"jit(init_one)", "jit(_train_chunk)", "jit(_eval_split)"}
    assert not (program | {"jit(_epochs)"}) & set(counter.compiled), counter.compiled
    monkeypatch.setattr(_memory, "free_memory_bytes", lambda: None)  # memory unknown: runs
    with CompileCounter() as control:
        train(model_fn, data, TrainConfig(epochs=1, batch_size=16, progress=False), GRID)
    assert program <= set(control.compiled), control.compiled


def test_ctrl_c_says_which_epochs_are_checkpointed_and_resume_says_where_it_continues(
        tmp_path, monkeypatch, capsys):
    from swan_jax.train import TrainingInterrupted, _loop

    data = splits(line_swap_dataset())
    real_epoch = _loop.train_epoch
    calls = []

    def interrupted_in_the_third_epoch(pipeline, state, hp, epoch, on_steps):
        calls.append(1)
        if len(calls) == 3:
            on_steps(1)  # a step of the third epoch, then Ctrl-C
            raise KeyboardInterrupt
        return real_epoch(pipeline, state, hp, epoch, on_steps)

    monkeypatch.setattr(_loop, "train_epoch", interrupted_in_the_third_epoch)
    cfg = TrainConfig(epochs=4, batch_size=4, checkpoint_dir=str(tmp_path), progress=False,
                      description="swap")  # one epoch per call; blocks: tests/test_fused.py
    with pytest.raises(TrainingInterrupted) as err:
        train(model_fn, data, cfg, GRID[:1])
    assert (err.value.epochs_done, err.value.checkpoint_dir) == (2, str(tmp_path))
    monkeypatch.setattr(_loop, "train_epoch", real_epoch)
    first_session = json.loads((tmp_path / "2" / "meta" / "metadata").read_text())["wall_time"]
    capsys.readouterr()
    resumed = train(model_fn, data, TrainConfig(**{**cfg.__dict__, "resume": True}), GRID[:1])
    assert f"swap: resuming after epoch 2 of 4 from {tmp_path}" in capsys.readouterr().out
    assert resumed.epochs_completed == 4
    assert resumed.wall_time > first_session  # wall time adds up across sessions
    assert [json.loads(line)["epoch"] for line in
            (tmp_path / "history.jsonl").read_text().splitlines()] == [0, 1, 2, 3]


def test_the_first_epochs_step_bar_has_a_total(monkeypatch):
    from swan_jax.train import _progress

    totals = []
    real = _progress.Progress.step_bar

    def spy(self, epoch, total):
        totals.append(total)
        return real(self, epoch, total)

    monkeypatch.setattr(_progress.Progress, "step_bar", spy)
    data = splits(line_swap_dataset())  # 16 training graphs, 4 per step
    train(model_fn, data, TrainConfig(epochs=2, batch_size=4, progress=True),
          GRID[:1])  # (too few epochs to fuse; a fused block has no step bar)
    assert totals == [4, 4]
