"""ADGN differential on GraphProp "SSSP" (issue 37, item 5): why does ADGN on our pipeline
stop near -1.4 when the paper reports -3.2417 from the authors' own ADGN pipeline?

Three candidates, one step each (each in its own interpreter: JAX and torch never meet):

* the data: our generator (`swan_jax.data.graphprop`, seed 1234) against PNA's own
  generator (lukecavabarrett/pna, `multitask_benchmark/datasets_generation/`) run with the
  "25-35" node counts the authors' loader names (`pna_dataset_25-35.pkl`);
* the score: the authors' log10 of the batch-mean loss against our pooled graph mean, on
  every epoch of a real curve;
* the training: the authors' ADGN (gravins/Anti-SymmetricDGN, `graph_prop_pred/`) with
  its OWN loader (`utils/pna_dataset.py`), model (`models/antisymmetric_GraphProp.py`),
  configuration generator (`conf.py`) and training pipeline
  (`train_GraphProp.train_val_pipeline_GraphProp`: seeds, Adam, DataLoader, early
  stopping, best-epoch choice) on a PNA-format file written from OUR data.

The authors' code is never copied here: it is imported at run time from `--ref` (a
`git archive` outside this repository), with the stand-ins of
`reproductions/_differential.py` (`SHIMS`: `ray.remote` as the identity, `torch_scatter`
on `torch_geometric.utils.scatter`), and with their `models/__init__.py` (which imports
`torch_sparse` and `torchdyn` for other models) bypassed: `conf.py` gets a `models`
module holding the real ADGN class. Steps, from the repository's root (REPORT.md beside
this file gives every command of the report):

    S=reproductions.graphprop-adgn-differential.study
    .venv/bin/python -m $S export
    $TORCH_PY -m $S pna-data --source ours
    $TORCH_PY -m $S pna-data --source pna --pna <pna root>
    $TORCH_PY -m $S compare
    $TORCH_PY -m $S authors --data ours --tag adj-eps1 --ref <Anti-SymmetricDGN root>
    .venv/bin/python -m $S plot --ours <label>=<history.csv>:<run> ...

Outputs: beside this file (curve JSON / CSV, `data.json`, `curves.png`); logs, data files
and the shims: `logs/graphprop-adgn-differential/` (git-ignored).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

from reproductions._differential import (
    ROOT,
    Command,
    batched_graph,
    both_scores,
    pyplot,
    reference_code,
    save_arrays,
    write_json,
)

OUT = Path(__file__).resolve().parent
LOGS = ROOT / "logs" / "graphprop-adgn-differential"
SPLITS = ("train", "val", "test")
DIM = "25-35"  # the authors' loader reads pna_dataset_25-35.pkl (pna_dataset.py, line 43)
NODE_RANGE = range(25, 35)  # PNA's `N` with the authors' node counts (see pna_data)
# The point of the CPU measurement (shared/measurements/2026-11-28-cpu/graphprop-budget).
POINT = {"hidden": 30, "num_layers": 5, "gamma": 0.1}
ADGN = "gravins/Anti-SymmetricDGN"  # the authors' repository (graph_prop_pred/)
# conf.py: c5 aggregates by a plain neighbour sum `A x V^T`, c4 by a GCNConv
# (`D^-1/2 (A + I) D^-1/2 x W^T`); both with weight sharing, as the paper's ADGN.
ADGN_MODELS = {"sum": "GraphAntiSymmetricNN_weight_sharing_GraphProp",
               "gcnnorm": "GraphAntiSymmetricNN_weight_sharing_gcnnorm_GraphProp"}


# ------------------------------------------------------------------------ our data

def export(args) -> None:
    """Our raw splits (all three PNA node columns and the diameter) as arrays. (swan_jax
    imported here: the authors' steps run in a venv without JAX.)"""
    import numpy as np

    from swan_jax.data import graphprop

    raw, _ = graphprop.load_graphprop_raw(cache_dir=args.cache, seed=args.data_seed)
    arrays = {}
    for split, data in raw.items():
        for field in ("nodes", "senders", "receivers", "n_node", "n_edge", "node_targets",
                      "graph_targets"):
            arrays[f"{split}_{field}"] = np.asarray(getattr(data, field))
    path = LOGS / "ours_raw.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    print(f"wrote {path}: " + ", ".join(f"{s} {len(raw[s])} graphs" for s in SPLITS))


# -------------------------------------------------------------------- PNA-format files

def _graph_extras(adj):
    """PNA's other graph labels, `[is_connected, diameter, spectral_radius]` order: the
    loader reads only column 1 (the diameter), the others are filled for the format."""
    import numpy as np

    eig = np.linalg.eigvalsh(adj)
    return float(np.abs(eig).max())


def ours_to_pna(path: Path):
    """Our exported splits in the layout of PNA's pickle (`DatasetMultitask`): per split a
    list of batches (one per node count), each a stacked tensor."""
    import numpy as np
    import torch

    with np.load(path) as f:  # an NpzFile decompresses on every access: read once
        a = dict(f)
    adj, feats, nodes, graphs = {}, {}, {}, {}
    for split in SPLITS:
        n_node, n_edge = a[f"{split}_n_node"], a[f"{split}_n_edge"]
        node_off = np.concatenate([[0], np.cumsum(n_node)])
        edge_off = np.concatenate([[0], np.cumsum(n_edge)])
        batches: dict[int, list] = {}
        for g, n in enumerate(n_node):
            m = np.zeros((n, n), np.float32)
            lo, hi = node_off[g], node_off[g + 1]
            s = a[f"{split}_senders"][edge_off[g]:edge_off[g + 1]]  # local node ids
            r = a[f"{split}_receivers"][edge_off[g]:edge_off[g + 1]]
            m[r, s] = 1.0
            dist_ok = a[f"{split}_node_targets"][lo:hi]
            diameter = float(a[f"{split}_graph_targets"][g, 0])
            connected = float(np.all(dist_ok[:, 0][np.arange(n) != np.argmax(
                a[f"{split}_nodes"][lo:hi, 0])] > 0))
            batches.setdefault(int(n), []).append(
                (m, a[f"{split}_nodes"][lo:hi], dist_ok,
                 np.array([connected, diameter, _graph_extras(m)], np.float32)))
        sizes = list(batches)  # generation order: one batch per node count
        adj[split] = [torch.tensor(np.stack([b[0] for b in batches[n]])) for n in sizes]
        feats[split] = [torch.tensor(np.stack([b[1] for b in batches[n]])) for n in sizes]
        nodes[split] = [torch.tensor(np.stack([b[2] for b in batches[n]])) for n in sizes]
        graphs[split] = [torch.tensor(np.stack([b[3] for b in batches[n]])) for n in sizes]
    return adj, feats, nodes, graphs


def _fast_apsp():
    """A vectorised `graph_algorithms.all_pairs_shortest_paths` with the same output: the
    same Floyd-Warshall relaxation `A[i][j] = min(A[i][j], A[i][k] + A[k][j])` over k, on
    the whole matrix per k instead of three Python loops (about 40 ms a call at N = 30, 3
    calls per graph, 7,040 graphs), exact on these integer-valued floats."""
    import math as _math

    import numpy as np

    def all_pairs_shortest_paths(A, inf_sub=_math.inf):
        A = np.array(A, dtype=np.float64)
        n = A.shape[0]
        A = np.where(A == 0, np.inf, A)
        A[np.arange(n), np.arange(n)] = 0
        for k in range(n):
            A = np.minimum(A, A[:, k:k + 1] + A[k:k + 1, :])
        return np.where(A == np.inf, inf_sub, A)

    return all_pairs_shortest_paths


def pna_generate(pna: Path, out: Path, seed: int) -> None:
    """PNA's `DatasetMultitask` with its command-line defaults (seed 1234, graph type
    RANDOM, node labels `["eccentricity", "graph_laplacian_features", "sssp"]`, graph labels
    `["is_connected", "diameter", "spectral_radius"]`, 512 x 10 / 128 x 5 / 256 x 5 graphs)
    and the authors' node counts 25-34 (PNA's default is 15-24; the authors' file name
    says 25-35, and the paper's appendix 25 to 35 nodes)."""
    from inspect import signature

    import numpy as np

    sys.path.insert(0, str(pna))
    from multitask_benchmark.datasets_generation import graph_algorithms
    from multitask_benchmark.datasets_generation import multitask_dataset as md

    graph_algorithms.all_pairs_shortest_paths = _fast_apsp()
    node_algs = [getattr(graph_algorithms, s) for s in ("eccentricity",
                                                        "graph_laplacian_features")]
    graph_algs = [getattr(graph_algorithms, s) for s in ("is_connected", "diameter",
                                                         "spectral_radius")]

    def get_nodes_labels(A, F, initial=None):  # multitask_dataset.py, lines 116-121
        labels = [] if initial is None else [initial]
        for f in node_algs:
            labels.append(f(A, F) if "F" in signature(f).parameters else f(A))
        return np.swapaxes(np.stack(labels), 0, 1)

    def get_graph_labels(A, F):  # lines 124-129
        labels = []
        for f in graph_algs:
            labels.append(f(A, F) if "F" in signature(f).parameters else f(A))
        return np.asarray(labels).flatten()

    out.parent.mkdir(parents=True, exist_ok=True)
    md.DatasetMultitask(
        n_graphs={"train": [512] * 10, "val": [128] * 5, "default": [256] * 5},
        N={"train": NODE_RANGE, "val": NODE_RANGE, "test": NODE_RANGE}, seed=seed,
        graph_type=md.GraphType.RANDOM, get_nodes_labels=get_nodes_labels,
        get_graph_labels=get_graph_labels, print_every=20, sssp=True, filename=str(out))


def pna_data(args) -> None:
    import torch

    out = LOGS / args.source / f"pna_dataset_{DIM}.pkl"
    started = time.time()
    if args.source == "ours":
        out.parent.mkdir(parents=True, exist_ok=True)
        arrays = ours_to_pna(LOGS / "ours_raw.npz")
        with open(out, "wb") as f:
            torch.save(arrays, f)
    else:
        if args.pna is None:
            raise SystemExit("--source pna needs --pna <root of a lukecavabarrett/pna copy>")
        pna_generate(Path(args.pna), out, args.data_seed)
    print(f"wrote {out} ({time.time() - started:.0f} s)")


# ----------------------------------------------------------------------- the data

def _load_pna(path: Path):
    import torch

    with open(path, "rb") as f:
        return torch.load(f, weights_only=False)


def data_stats(path: Path) -> dict[str, Any]:
    """Counts, sizes and label distributions of a PNA-format file, per split; the node
    columns in PNA's stored order `[sssp, eccentricity, laplacian]`."""
    import numpy as np

    adj, feats, nodes, graphs = _load_pna(path)
    out: dict[str, Any] = {}
    for split in SPLITS:
        sizes = [int(b.shape[1]) for b in adj[split]]
        counts = [int(b.shape[0]) for b in adj[split]]
        edges = np.concatenate([b.numpy().sum(axis=(1, 2)) / 2 for b in adj[split]])
        lab = np.concatenate([b.numpy().reshape(-1, b.shape[-1]) for b in nodes[split]])
        diam = np.concatenate([b.numpy()[:, 1] for b in graphs[split]])
        # Connected: every node but the source at a positive distance from it (PNA's
        # own `is_connected`, graph column 0, squares A without self-loops and so calls
        # every bipartite graph disconnected; the loader never reads it).
        conn = np.concatenate([
            ((d.numpy()[..., 0] > 0) | (f.numpy()[..., 0] == 1)).all(axis=1)
            for d, f in zip(nodes[split], feats[split], strict=True)])
        value = np.concatenate([b.numpy()[..., 1].ravel() for b in feats[split]])
        lap_graph_mse, lap_neg = [], []  # per graph: node mean of y^2, of min(y, 0)^2
        for b in nodes[split]:
            y = b.numpy()[..., 2].astype(np.float64)
            lap_graph_mse.append((y ** 2).mean(axis=1))
            lap_neg.append((np.minimum(y, 0) ** 2).mean(axis=1))
        col = {name: lab[:, i] for i, name in enumerate(("sssp", "eccentricity",
                                                          "laplacian"))}
        out[split] = {
            "graphs": int(sum(counts)), "node_counts": sizes, "graphs_per_count": counts,
            "nodes": int(lab.shape[0]), "edges_per_graph_mean": float(edges.mean()),
            "edges_per_graph_median": float(np.median(edges)),
            "connected_fraction": float(conn.mean()),
            "value_mean": float(value.mean()),
            **{f"{k}_{s}": float(getattr(np, s)(v)) for k, v in col.items()
               for s in ("mean", "std", "min", "max")},
            "laplacian_negative_fraction": float((col["laplacian"] < 0).mean()),
            "laplacian_abs_p99": float(np.quantile(np.abs(col["laplacian"]), 0.99)),
            "diameter_mean": float(diam.mean()), "diameter_max": float(diam.max()),
            "log10_zero_predictor": math.log10(float(np.concatenate(lap_graph_mse).mean())),
            "log10_negatives_as_zero": math.log10(float(np.concatenate(lap_neg).mean())),
        }
    return out


def compare(args) -> None:
    result = {}
    for source in ("ours", "pna"):
        path = LOGS / source / f"pna_dataset_{DIM}.pkl"
        if path.exists():
            result[source] = data_stats(path)
    if not result:
        raise SystemExit(f"no PNA-format files under {LOGS}: run the pna-data step first")
    write_json(OUT, "data.json", result)
    keys = [k for k in next(iter(result.values()))["train"]
            if k not in ("node_counts", "graphs_per_count")]
    lines = ["| quantity | " + " | ".join(f"{s} {src}" for src in result for s in SPLITS)
             + " |", "|" + " --- |" * (1 + len(result) * len(SPLITS))]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(
            f"{result[src][s][k]:.4g}" for src in result for s in SPLITS) + " |")
    (OUT / "data.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# --------------------------------------------------------------- the authors' ADGN

def _import_file(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_reference(ref: Path, shims: Path):
    """The authors' `train_GraphProp` and `conf` modules, imported from `ref`."""
    code = reference_code(ref, shims, code="graph_prop_pred",
                          marker="models/antisymmetric_GraphProp.py", repo=ADGN)
    adgn = _import_file("antisymmetric_GraphProp", code / "models" /
                        "antisymmetric_GraphProp.py")
    models = types.ModuleType("models")  # their models/__init__ imports torch_sparse etc.
    models.GraphAntiSymmetricNN_GraphProp = adgn.GraphAntiSymmetricNN_GraphProp
    for other in ("DGN_GraphProp", "DGC_GraphProp", "GRAND_GraphProp"):
        setattr(models, other, None)  # other models of conf.CONFIGS, not run here
    models.__all__ = ["GraphAntiSymmetricNN_GraphProp", "DGN_GraphProp", "DGC_GraphProp",
                      "GRAND_GraphProp"]
    sys.modules["models"] = models
    import conf
    import train_GraphProp

    return conf, train_GraphProp


def _their_config(conf, model: str, epsilon: float, epochs: int, patience: int, seed: int,
                  node_level: bool) -> dict[str, Any]:
    """The point from their own generator (`conf.py`), completed as their
    `model_selection.py` does (lines 52-65), with our seed instead of their four."""
    config_fun, _ = conf.CONFIGS[model]
    for c in config_fun(2, 1):
        m = c["model"]
        if (m["hidden_dim"], m["num_layers"], m["epsilon"], m["gamma"]) == (
                POINT["hidden"], POINT["num_layers"], epsilon, POINT["gamma"]):
            c["exp"] = {"conf_id": None, "task": "dist", "epochs": epochs,
                        "patience": patience, "batch_size": 512, "seeds": [seed]}
            c["model"].update({"input_dim": 2, "output_dim": 1,
                               "node_level_task": node_level})
            return c
    raise SystemExit(f"epsilon {epsilon} with {POINT} is not a point of their grid")


def run_authors(args) -> None:
    # Their loader reads its processed file with a bare torch.load (pna_dataset.py, line
    # 34): torch >= 2.6 loads weights only by default and refuses the PyG Data inside; the
    # files are the ones this script wrote, so the pre-2.6 behaviour is restored for them.
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    import numpy as np
    import torch

    torch.set_num_threads(1)
    conf, tg = load_reference(Path(args.ref), Path(args.shims))
    data_dir = LOGS / args.data
    if not (data_dir / f"pna_dataset_{DIM}.pkl").exists():
        raise SystemExit(f"no {data_dir}/pna_dataset_{DIM}.pkl: run pna-data --source "
                         f"{args.data} first")
    model = ADGN_MODELS[args.aggregation]
    config = _their_config(conf, model, args.epsilon, args.epochs, args.patience, args.seed,
                           True)
    curves: dict[str, list] = {"train_loss": [], "val_batch_mean": [], "test_batch_mean": [],
                               "val": [], "test": [], "seconds": []}
    original_train, original_evaluate = tg.train, tg.evaluate
    started = time.time()
    checked = []

    def train(model, optimizer, dataloader, criterion, device):
        out = original_train(model, optimizer, dataloader, criterion, device)
        curves["train_loss"].append(out[0])
        return out

    def evaluate(model, criterion, dataloader, device):
        """Theirs (`train_GraphProp.evaluate`: mean of the batch losses, log10), and in the
        same pass our pooled score. The first call also runs their own function and checks
        that the values are the same."""
        pooled, loss = both_scores(model, dataloader, True, criterion)
        if not checked:
            theirs = original_evaluate(model, criterion, dataloader, device)
            if abs(theirs[0] - loss) > 1e-6 * abs(loss):
                raise SystemExit(f"evaluate differs from theirs: {loss} vs {theirs[0]}")
            checked.append(theirs[0])
        split = "val" if len(curves["val"]) == len(curves["test"]) else "test"
        curves[f"{split}_batch_mean"].append(math.log10(loss))
        curves[split].append(math.log10(pooled))
        if split == "test":
            curves["seconds"].append(time.time() - started)
            epoch = len(curves["test"]) - 1
            if epoch % args.print_every == 0:
                print(f"epoch {epoch}: train {curves['train_loss'][-1]:.4g} val "
                      f"{curves['val'][-1]:.4f} ({curves['val_batch_mean'][-1]:.4f}) test "
                      f"{curves['test'][-1]:.4f} ({time.time() - started:.0f} s)", flush=True)
                save(finished=False)  # a run stopped early keeps its curve
        return loss, np.log10(loss)

    def save(finished: bool, their_result: dict | None = None) -> None:
        write_json(OUT, f"{args.tag}_authors.json", {
            "side": "authors", "finished": finished,
            "code": f"gravins/Anti-SymmetricDGN graph_prop_pred, {model}",
            "data": args.data, "config": config, "their_result": their_result,
            "evaluate_check": checked, "wall_seconds": time.time() - started, **curves})

    tg.train, tg.evaluate = train, evaluate
    result = tg.train_val_pipeline_GraphProp(
        conf.CONFIGS[model][1], config, str(data_dir), "GraphProp",
        early_stopping_patience=args.patience, device="cpu", path_save_best=None)
    save(True, {k: float(v) for k, v in result["single_res"][0].items()})


# ---------------------------------------------------------------- one step, both codes

def field_authors(args) -> None:
    """One step of the authors' `AntiSymmetricConv` (no GCN normalisation, the c5 model) on
    the first 4 validation graphs of our data, with its parameters and input saved."""
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    import numpy as np
    import torch

    load_reference(Path(args.ref), Path(args.shims))
    adgn = sys.modules["antisymmetric_GraphProp"]
    with np.load(LOGS / "ours_raw.npz") as f:
        a = dict(f)
    n_node, n_edge = a["val_n_node"][:4], a["val_n_edge"][:4]
    offsets = np.repeat(np.cumsum(n_node) - n_node, n_edge)  # local ids -> batch ids
    edges = np.stack([a["val_senders"][:n_edge.sum()], a["val_receivers"][:n_edge.sum()]])
    edge_index = torch.tensor(edges + offsets, dtype=torch.long)
    torch.manual_seed(args.seed)
    conv = adgn.AntiSymmetricConv(POINT["hidden"], num_iters=1, gamma=POINT["gamma"],
                                  epsilon=args.epsilon)
    x = 0.3 * torch.randn(int(n_node.sum()), POINT["hidden"])  # tanh not saturated
    with torch.no_grad():
        step = (conv(x, edge_index) - x) / args.epsilon
    arrays = {"x": x, "edge_index": edge_index, "n_node": torch.tensor(n_node),
              "W": conv.W, "V_lin": conv.lin.weight, "b": conv.bias, "step": step}
    save_arrays(LOGS / "field.npz", arrays)


def field_ours(args) -> None:
    """Our `vector_field` (variant adgn) with their parameters mapped onto ours (W = W_a^T,
    V = V_lin^T, b = b), for both of our adjacencies, against their step."""
    import jax.numpy as jnp
    import numpy as np

    import swan_jax as sj

    a = np.load(LOGS / "field.npz")
    graph = batched_graph(a["edge_index"], a["n_node"])
    params = {"W": jnp.asarray(a["W"].T), "V": jnp.asarray(a["V_lin"].T),
              "b": jnp.asarray(a["b"])}
    result = {"nodes": int(a["n_node"].sum()), "max_abs_step": float(np.abs(a["step"]).max())}
    for adjacency in ("adj", "sym"):
        cfg = sj.SWANConfig(variant="adgn", adjacency=adjacency, gamma=POINT["gamma"],
                            epsilon=args.epsilon, num_layers=1)
        ours = np.asarray(sj.vector_field(params, graph, jnp.asarray(a["x"]), cfg))
        result[f"max_abs_diff_{adjacency}"] = float(np.abs(ours - a["step"]).max())
    print(json.dumps(result, indent=1))
    write_json(OUT, "field_equivalence.json", result)


# --------------------------------------------------------------------- curves, figure

def read_ours(path: Path, run: int) -> dict[str, list]:
    """One run's columns of our `history.csv` (`--tracker csv`), cut where the run stopped
    (a run stopped by patience while others of its program go on repeats its last val and
    test until the program ends)."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    key = (lambda c: f"{c}/run{run}") if f"val/run{run}" in rows[0] else (lambda c: c)
    out = {c: [float(r[key(c)]) for r in rows] for c in ("train_loss", "val", "test")}
    last = len(rows)
    while last > 1 and all(out[c][last - 1] == out[c][last - 2] for c in ("val", "test")):
        last -= 1
    return {c: v[:last] for c, v in out.items()}


def plot(args) -> None:
    plt = pyplot()
    series = []
    for spec in args.ours:  # label=path:run
        label, rest = spec.split("=", 1)
        path, run = rest.rsplit(":", 1)
        series.append((label, read_ours(Path(path), int(run)), "ours"))
    for spec in args.authors:  # label=json
        label, path = spec.split("=", 1)
        series.append((label, json.loads(Path(path).read_text()), "authors"))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    rows = []
    for label, run, side in series:
        line, = axes[0].plot(run["val"], lw=1, label=f"{label} val")
        axes[0].plot(run["test"], lw=0.6, ls="--", color=line.get_color())
        if "val_batch_mean" in run:
            axes[1].plot([a - b for a, b in zip(run["val_batch_mean"], run["val"],
                                                strict=True)],
                         lw=0.8, color=line.get_color(), label=f"{label} val")
            axes[1].plot([a - b for a, b in zip(run["test_batch_mean"], run["test"],
                                                strict=True)],
                         lw=0.6, ls="--", color=line.get_color(), label=f"{label} test")
        for e in range(len(run["val"])):
            rows.append({"run": label, "side": side, "epoch": e, **{
                c: (f"{run[c][e]:.5g}" if c in run else "") for c in (
                    "train_loss", "val", "test", "val_batch_mean", "test_batch_mean")}})
    axes[0].axhline(-3.2417, color="k", lw=1, ls=":", label="paper ADGN -3.2417 (test)")
    axes[0].set(title='"SSSP" (Laplacian features): val (solid), test (dashed)',
                xlabel="epoch", ylabel="log10 MSE, pooled graph means")
    axes[1].set(title="authors' score minus pooled score (their runs)", xlabel="epoch",
                ylabel="log10 batch-mean - log10 pooled")
    for ax in axes:
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    OUT.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT / "curves.png", dpi=90)
    with open(OUT / "curves.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summarise(series, args.at)
    print(f"wrote {OUT / 'curves.png'} and {OUT / 'curves.csv'}")


def summarise(series: list, at: list[int]) -> None:
    """`summary.md`: validation log10 MSE (pooled) at the epochs `at`, and the best
    validation epoch within the first `horizon` epochs that every run reached, with its
    test (the protocol's choice, ties to the later epoch as the authors' loop does)."""
    horizon = min(len(run["val"]) for _, run, _ in series)
    head = " | ".join(f"val@{e}" for e in at)
    rows = [f"| run | epochs run | {head} | best val in {horizon} (epoch) | test there | "
            "best val of the run (epoch) | test there | authors' test score there |",
            "|" + " --- |" * (7 + len(at))]

    def best_of(val):
        return max(i for i, v in enumerate(val) if v == min(val))  # ties: the later

    for label, run, _ in series:
        early, best = best_of(run["val"][:horizon]), best_of(run["val"])
        cells = " | ".join(f"{run['val'][e]:.3f}" if e < len(run["val"]) else "-"
                           for e in at)
        authors = run.get("test_batch_mean")
        rows.append(f"| {label} | {len(run['val'])} | {cells} | {run['val'][early]:.3f} "
                    f"({early}) | {run['test'][early]:.3f} | {run['val'][best]:.3f} ({best})"
                    f" | {run['test'][best]:.3f} | "
                    + (f"{authors[best]:.3f} |" if authors else "- |"))
    (OUT / "summary.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


def main(argv: list[str] | None = None) -> int:
    cli = Command(OUT.name, __doc__ or "", LOGS)
    ex = cli.step("export", export, "our raw splits as arrays (this repository's venv)")
    ex.add_argument("--cache", default=str(LOGS / "cache"), help="our data cache folder")
    ex.add_argument("--data-seed", type=int, default=1234)
    pd = cli.step("pna-data", pna_data, "a PNA-format file from our data or PNA's generator")
    pd.add_argument("--source", choices=("ours", "pna"), required=True)
    pd.add_argument("--pna", help="root of a lukecavabarrett/pna copy (--source pna)")
    pd.add_argument("--data-seed", type=int, default=1234)
    cli.step("compare", compare, "counts, sizes and labels of both files")
    au = cli.step("authors", run_authors, "the authors' ADGN pipeline on one PNA-format file",
                  reference=ADGN)
    au.add_argument("--data", choices=("ours", "pna"), default="ours")
    au.add_argument("--tag", required=True)
    au.add_argument("--aggregation", choices=tuple(ADGN_MODELS), default="sum",
                    help="sum: their c5 model (our adjacency adj); gcnnorm: c4 (GCNConv)")
    au.add_argument("--epochs", type=int, default=1500)
    au.add_argument("--patience", type=int, default=100)
    au.add_argument("--print-every", type=int, default=25)
    fa = cli.step("field-authors", field_authors, "one step of their AntiSymmetricConv, "
                  "saved", reference=ADGN)
    fo = cli.step("field-ours", field_ours, "our ADGN field on the same inputs, compared")
    for p in (au, fa, fo):
        p.add_argument("--epsilon", type=float, default=1.0)
    for p in (au, fa):
        p.add_argument("--seed", type=int, default=0)
    pl = cli.step("plot", plot, "curves.png and curves.csv")
    pl.add_argument("--ours", nargs="*", default=[], help="label=history.csv:run")
    pl.add_argument("--authors", nargs="*", default=[], help="label=curve json")
    pl.add_argument("--at", type=lambda v: [int(e) for e in v.split(",")],
                    default=[0, 25, 50, 100, 200, 300], help="epochs of the summary table")
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
