"""Shared pieces of the benchmarks: machine record, timing, Peptides-func batches, models.

Every figure is taken on both paths from the same run: `"segment"` (a plain
`GraphsTuple`: edge weights and segment sums, the reference) and `"gather"` (the batch's
`PreparedGraph`: slot layout, gathers only). Timings of the two are interleaved so that
load from other processes on a shared machine falls on both alike."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np

import swan_jax as sj
from swan_jax.data import (
    DownloadError,
    GraphDataset,
    budget_for,
    iterate_batches,
    load_peptides_func,
)
from swan_jax.data.batching import padding_share
from swan_jax.encoders import AtomEncoder
from swan_jax.ogb_vocabulary import ATOM_FEATURE_DIMS, BOND_FEATURE_DIMS
from swan_jax.train import TrainConfig, init_runs, make_train_step, stack_hparams

ROOT = Path(__file__).resolve().parents[1]
HIDDEN, LAYERS, BATCH = 128, 5, 64  # the paper's runtime table (Appendix, "Runtimes")
PATHS = ("segment", "gather")


def machine() -> dict[str, Any]:
    """Where and with what a benchmark ran."""
    import diffrax

    return {"platform": platform.platform(), "processor": platform.processor() or "unknown",
            "cpu_count": os.cpu_count(), "device": str(jax.devices()[0]),
            "device_kind": jax.devices()[0].device_kind, "devices": jax.device_count(),
            "jax": jax.__version__, "flax": flax.__version__, "diffrax": diffrax.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "load_average": load_average()}


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (other processes included)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def timeit(fn: Callable[[], Any], repeat: int = 10, warmup: int = 1) -> dict[str, float]:
    """Median and spread of `repeat` wall-clock calls (results blocked on), after warmup,
    and the median CPU time of the process (all threads) per call."""
    return interleaved({"fn": fn}, repeat, warmup)["fn"]


def interleaved(fns: dict[str, Callable[[], Any]], repeat: int = 10, warmup: int = 1
                ) -> dict[str, dict[str, float]]:
    """`timeit` of several functions, called in turn (a, b, a, b, ...), so that the load
    of other processes during the run falls on all of them alike."""
    for fn in fns.values():
        for _ in range(warmup):
            jax.block_until_ready(fn())
    walls: dict[str, list[float]] = {k: [] for k in fns}
    cpus: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start, cpu = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn())
            walls[name].append(time.perf_counter() - start)
            cpus[name].append(time.process_time() - cpu)
    return {name: {"median_s": statistics.median(w), "min_s": min(w), "max_s": max(w),
                   "cpu_median_s": statistics.median(cpus[name]), "repeat": repeat}
            for name, w in walls.items()}


def matmul_rate(rows: int = 9600, width: int = 128, repeat: int = 30, columns: int | None = None
                ) -> float:
    """Measured f32 rate (FLOP/s, median time) of a `[rows, width] @ [width, columns]`
    product (`columns = width` by default: the field's unfused products)."""
    columns = width if columns is None else columns
    a = jax.random.normal(jax.random.PRNGKey(0), (rows, width), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (width, columns), jnp.float32)
    product = jax.jit(lambda a, b: a @ b)
    seconds = timeit(lambda: product(a, b), repeat=repeat, warmup=3)["median_s"]
    return 2.0 * rows * width * columns / seconds


def _synthetic_peptides(num_graphs: int, seed: int = 0) -> GraphDataset:
    """Peptide-shaped stand-ins (when the real files are absent): chains of about 151 atoms
    with a ring every 10 atoms, random OGB atom and bond codes, each column inside its own
    vocabulary (an embedding looks a code past its table up as NaN, so a stand-in with
    out-of-range codes would train on NaN losses)."""
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(num_graphs):
        n = int(rng.integers(120, 180))
        s = np.arange(n - 1)
        rings = np.arange(0, n - 6, 10)
        send = np.concatenate([s, rings])
        recv = np.concatenate([s + 1, rings + 5])
        e = len(send)
        graphs.append(dict(nodes=rng.integers(0, ATOM_FEATURE_DIMS, (n, 9)).astype(np.int32),
                           edges=rng.integers(0, BOND_FEATURE_DIMS, (2 * e, 3)).astype(np.int32),
                           senders=np.concatenate([send, recv]),
                           receivers=np.concatenate([recv, send]),
                           graph_targets=rng.integers(0, 2, (1, 10)).astype(np.float32)))
    return GraphDataset.from_graphs(graphs)


def peptides_train(num_graphs: int | None = None) -> tuple[GraphDataset, str]:
    """Peptides-func training graphs (real when the files are there) and their source."""
    data_dir = os.environ.get("SWAN_DATA_DIR") or str(ROOT.parent / "shared" / "data")
    try:
        splits = load_peptides_func(data_dir, download=False, progress=False)
        data, source = splits["train"], "peptides-func (real)"
    except (FileNotFoundError, DownloadError):
        data, source = _synthetic_peptides(num_graphs or 1024), "synthetic peptide-shaped"
    if num_graphs is not None and num_graphs < len(data):
        data = data.subset(range(num_graphs))
    return data, source


def peptide_batch(data: GraphDataset, seed: int = 0):
    """One padded Peptides batch of up to `BATCH` graphs under the budget that training
    uses for `data` (the first batch of a shuffled epoch), on the device."""
    budget = budget_for(data, BATCH)
    batch = next(iterate_batches(data, BATCH, budget, np.random.default_rng(seed)))
    return jax.tree_util.tree_map(jnp.asarray, batch), budget


def on_path(batch, path: str):
    """The batch as the `"gather"` path sees it (prepared) or the `"segment"` one (plain)."""
    return batch if path == "gather" else batch._replace(graph=sj.graph.plain_graph(batch.graph))


def padding_record(data: GraphDataset, batch, budget) -> dict[str, Any]:
    """Padding of `batch` and, over a whole shuffled epoch, of the training batches."""
    shares = [padding_share(b) for b in iterate_batches(data, BATCH, budget,
                                                       np.random.default_rng(1))]
    full = shares[:-1] or shares  # the last batch of an epoch is a remainder
    return {"batch_padding_share": padding_share(batch),
            "epoch_padding_share_mean": float(np.mean(full)),
            "epoch_padding_share_max": float(np.max(full)), "epoch_batches": len(shares),
            "budget": {"nodes": budget.n_node, "edges": budget.n_edge,
                       "slot_width": budget.slot_width, "overflow_rows": budget.n_overflow,
                       "pairs": budget.n_pair}}


def lrgb_model(kind: str, hidden: int = HIDDEN, layers: int = LAYERS, solver: str = "euler"):
    """Atom encoder, processor (`swan`, `swan-learn`, `graphcon`, or a baseline such as
    `gcn`), and the LRGB experiment's mean-pool MLP head for Peptides-func's 10 labels."""
    head = sj.GraphReadout((hidden, hidden // 2, 10), pooling=("mean",))
    if kind in sj.VARIANTS:
        cfg = sj.SWANConfig(variant=kind, adjacency="sym", num_layers=layers, beta=1.0,
                            gamma=0.1, epsilon=1.0)
        processor = sj.SWANBlock(cfg, solver)
    elif kind == "graphcon":  # GraphCON-GCN at its own defaults (dt = alpha = gamma = 1)
        processor = sj.GraphCONBlock(layers)
    else:
        processor = sj.MPNNStack(kind, hidden, layers)
    return sj.Model(AtomEncoder(hidden), processor, head)


# GPS at the runtime table's setting (docs/gps.md): GraphGPS's Peptides-func
# configuration (GatedGCN + Transformer, 4 heads, LapPE max_freqs 10 in 16 channels, Bond
# edge encoder, mean pooling) at the table's 128 channels and 5 layers.
GPS_LAP_K, GPS_PE_DIM, GPS_HEADS = 10, 16, 4


def lrgb_gps_model(max_nodes: int, hidden: int = HIDDEN, layers: int = LAYERS):
    """GraphGPS for Peptides-func's 10 labels over data with `GPS_LAP_K` LapPE columns
    (`swan_jax.data.positional.with_positional_encodings`); `max_nodes`: the largest graph."""
    from swan_jax.gps import BondEncoder, GPSEncoder, GPSStack, gps_feature_width

    head = sj.GraphReadout((hidden, hidden // 2, 10), pooling=("mean",))
    width = gps_feature_width(hidden, GPS_LAP_K, 0, GPS_PE_DIM)
    encoder = GPSEncoder(AtomEncoder(width), GPS_LAP_K, pe_dim=GPS_PE_DIM)
    processor = GPSStack(hidden, layers, max_nodes, num_heads=GPS_HEADS, local="gatedgcn",
                         edge_encoder=BondEncoder(hidden))
    return sj.Model(encoder, processor, head)


def train_step_fn(model, batch, seeds: int = 1):
    """The training loop's own step (`swan_jax.train.make_train_step`: AdamW, BCE, finite
    checks) for `seeds` runs of `model` on `batch`: `once()` takes one step; `state` holds
    the stacked parameters and optimiser states."""
    cfg = TrainConfig(optimizer="adamw", loss="bce", metric="ap", task_level="graph",
                      seeds=tuple(range(seeds)), progress=False)

    def model_fn(hp):
        return model

    runs, hp = stack_hparams([{}], cfg.seeds, cfg)
    params, opt_state = init_runs(model_fn, cfg, batch.graph, cfg.seeds, hp)
    step = make_train_step(model_fn, cfg)
    state = {"params": params, "opt": opt_state}
    active = jnp.ones(len(runs), bool)

    def once():
        state["params"], state["opt"], loss = step(state["params"], state["opt"], hp, batch,
                                                   active)
        return loss

    return once, state
