"""The authors' PyTorch SWAN, timed on the same device and data as swan-jax (optional).

    python -m benchmarks.reference_pytorch --ref PATH/graph_property_prediction/models/swan.py

loads the authors' public model file (gravins/SWAN) at run time -- nothing of it is copied
into this repository -- and times, on the same device, for Peptides-func batches of 64
graphs (hidden 128, 5 layers, graph-level head, BCE, Adam 1e-3):

- its training step (median over batches, after a warm-up), SWAN and SWAN-learn;
- its full epoch: PyG's `DataLoader` over the training split, then evaluation of the
  validation and test splits (as the paper's runtime table counts it);
- the same for swan-jax in the same process when jax is importable (its training step on
  the same padded batches, and an epoch of `swan_jax.train.train` with the device
  pipeline), so every ratio comes from one run.

`--graphprop-epochs DATA.npz` serves `benchmarks.epoch_anatomy --grid` instead: it builds
the authors' GraphProp SWAN (hidden 20, 10 layers, one shared `W`, epsilon 0.1, gamma 0.1,
beta 1, their default `AntiSymNaiveAggr`, node-level head; Adam 3e-3, batch 512) on the
exported splits, then times one epoch (training, then validation and test without
gradients) per line read from stdin and prints its wall and CPU seconds as one JSON line.
The loop is the one of their `train_GraphProp.py` (zero_grad, forward, per-graph mean
squared error averaged over the batch's graphs, backward, step).

Run-time patches, printed with the results: the reference's non-learned SWAN calls
`edge_weight.shape()` in `ConstrainedConv.message` and crashes; that one branch is
replaced by the same computation with `edge_weight.dim()`. Where `torch_scatter` (no
wheel on PyPI for recent torch) is missing, its `scatter_add` is served by
`torch_geometric.utils.scatter`. Inputs are the molecules' 9 integer atom features as
floats (the reference has no atom encoder). Needs torch and torch_geometric.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

PATCHES: list[str] = []


def _torch_scatter_shim() -> None:
    """Serve `torch_scatter.scatter_add` from PyG when the package is absent."""
    try:
        import torch_scatter  # noqa: F401
        return
    except ImportError:
        from torch_geometric.utils import scatter

    shim = types.ModuleType("torch_scatter")
    shim.scatter_add = lambda src, index, dim=0, out=None, dim_size=None: scatter(
        src, index, dim=dim, dim_size=dim_size, reduce="sum")
    shim.scatter = lambda src, index, dim=0, out=None, dim_size=None, reduce="sum": scatter(
        src, index, dim=dim, dim_size=dim_size, reduce=reduce)
    sys.modules["torch_scatter"] = shim
    PATCHES.append("torch_scatter.scatter_add served by torch_geometric.utils.scatter")


def load_reference(path: Path):
    """The authors' module from `path`, with the one crashing branch patched."""
    import torch

    _torch_scatter_shim()
    spec = importlib.util.spec_from_file_location("swan_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # PyG reads the annotations' module by name
    spec.loader.exec_module(module)
    original = module.ConstrainedConv.message

    def message(self, x_j: torch.Tensor, edge_weight: torch.Tensor | None = None
                ) -> torch.Tensor:
        if edge_weight is not None and self.lin_edge is None and edge_weight.dim() == 1:
            return edge_weight.view(-1, 1) * x_j  # the branch as intended
        return original(self, x_j, edge_weight)

    module.ConstrainedConv.message = message
    PATCHES.append("ConstrainedConv.message: 1-D edge_weight branch (edge_weight.shape() "
                   "TypeError) uses edge_weight.dim()")
    return module


def pyg_graphs(arrays: dict[str, np.ndarray]):
    """PyG `Data` objects from a swan-jax `GraphDataset`'s arrays (the .npz fields)."""
    import torch
    from torch_geometric.data import Data

    n_node, n_edge = arrays["n_node"], arrays["n_edge"]
    node_off = np.concatenate([[0], np.cumsum(n_node)])
    edge_off = np.concatenate([[0], np.cumsum(n_edge)])
    out = []
    for g in range(len(n_node)):
        nodes = slice(node_off[g], node_off[g + 1])
        edges = slice(edge_off[g], edge_off[g + 1])
        index = np.stack([arrays["senders"][edges], arrays["receivers"][edges]])
        out.append(Data(x=torch.as_tensor(arrays["nodes"][nodes], dtype=torch.float32),
                        edge_index=torch.as_tensor(index, dtype=torch.long),
                        y=torch.as_tensor(arrays["graph_targets"][g:g + 1],
                                          dtype=torch.float32)))
    return out


def time_reference(module, splits, device: str, rounds: int) -> dict:
    """Training step and epoch of the reference's SWAN and SWAN-learn."""
    import torch
    from torch_geometric.loader import DataLoader

    out = {}
    for name, attention in (("swan", False), ("swan_learn", True)):
        torch.manual_seed(0)
        model = module.SWAN(input_dim=9, output_dim=10, hidden_dim=128, num_layers=5,
                            epsilon=1.0, gamma=0.1, beta=1.0, attention=attention,
                            weight_sharing=True).to(device)  # one W, 5 steps: as ours
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.BCEWithLogitsLoss()

        def step(batch, model=model, opt=opt, loss_fn=loss_fn):
            opt.zero_grad()
            loss = loss_fn(model(batch), batch.y)
            loss.backward()
            opt.step()
            return loss

        def sync():
            if device.startswith("cuda"):
                torch.cuda.synchronize()

        batches = [b.to(device) for b in DataLoader(splits["train"][:64 * 12], batch_size=64)]
        for b in batches[:3]:
            step(b)
        sync()
        steps = []
        for b in batches[3:]:
            start = time.perf_counter()
            step(b)
            sync()
            steps.append(time.perf_counter() - start)
        epochs, evals = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            for b in DataLoader(splits["train"], batch_size=64, shuffle=True):
                step(b.to(device))
            sync()
            epochs.append(time.perf_counter() - start)
            start = time.perf_counter()
            with torch.no_grad():
                for split in ("val", "test"):
                    for b in DataLoader(splits[split], batch_size=64):
                        model(b.to(device))
            sync()
            evals.append(time.perf_counter() - start)
        out[name] = {"step_median_s": statistics.median(steps), "train_epoch_s": epochs,
                     "eval_s": evals, "epoch_with_eval_median_s": statistics.median(
                         [a + b for a, b in zip(epochs, evals, strict=True)]),
                     "params": sum(p.numel() for p in model.parameters())}
    return out


def node_graphs(arrays: dict[str, np.ndarray], split: str):
    """PyG `Data` objects of one split of an exported GraphProp file (node targets)."""
    fields = {k: arrays[f"{split}_{k}"] for k in ("nodes", "senders", "receivers", "n_node",
                                                  "n_edge")}
    graphs = pyg_graphs({**fields, "graph_targets": np.zeros((len(fields["n_node"]), 1))})
    offsets = np.concatenate([[0], np.cumsum(fields["n_node"])])
    import torch

    for g, data in enumerate(graphs):
        data.y = torch.as_tensor(arrays[f"{split}_y"][offsets[g]:offsets[g + 1]],
                                 dtype=torch.float32)
    return graphs


def serve_graphprop_epochs(module, data: Path, threads: int) -> None:
    """One authors' GraphProp epoch per stdin line, its seconds as a JSON line (see above)."""
    import torch
    from torch_geometric.loader import DataLoader
    from torch_geometric.utils import scatter

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    arrays = dict(np.load(data))
    splits = {s: node_graphs(arrays, s) for s in ("train", "val", "test")}
    model = module.SWAN(input_dim=splits["train"][0].x.shape[1], output_dim=1, hidden_dim=20,
                        num_layers=10, epsilon=0.1, gamma=0.1, beta=1.0, activ_fun="tanh",
                        graph_conv="AntiSymNaiveAggr", attention=False,
                        node_level_task=True, weight_sharing=True, bias=True)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-6)
    loaders = {s: DataLoader(g, batch_size=512, shuffle=s == "train") for s, g in splits.items()}

    def loss_of(batch):
        per_node = ((model(batch).view(-1) - batch.y.view(-1)) ** 2)
        return scatter(per_node, batch.batch, reduce="mean").mean()

    print(json.dumps({"ready": True, "patches": PATCHES}), flush=True)
    for _ in sys.stdin:
        wall, cpu = time.perf_counter(), time.process_time()
        model.train()
        for batch in loaders["train"]:
            opt.zero_grad()
            loss_of(batch).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for split in ("val", "test"):
                for batch in loaders[split]:
                    loss_of(batch)
        print(json.dumps({"wall_s": time.perf_counter() - wall,
                          "cpu_s": time.process_time() - cpu}), flush=True)


def time_ours(quick: bool, epochs: int) -> dict:
    """swan-jax on the same device: its step (benchmark 1's) and a `train` epoch."""
    from benchmarks.common import interleaved, lrgb_model, peptide_batch, peptides_train
    from benchmarks.epoch_anatomy import _epochs, _peptides
    from swan_jax.train import TrainConfig, init_runs, make_train_step, stack_hparams

    data, _ = peptides_train(600 if quick else None)
    batch, _ = peptide_batch(data)
    out = {}
    for kind in ("swan", "swan-learn"):
        cfg = TrainConfig(optimizer="adam", loss="bce", task_level="graph")
        runs, hp = stack_hparams([{}], (0,), cfg)
        params, opt = init_runs(lambda h, k=kind: lrgb_model(k), cfg, batch.graph, (0,), hp)
        step = make_train_step(lambda h, k=kind: lrgb_model(k), cfg)
        active = np.ones(1, bool)
        state = {"p": params, "o": opt}

        def call(step=step, state=state, hp=hp, active=active):
            state["p"], state["o"], loss = step(state["p"], state["o"], hp, batch, active)
            return loss

        out[kind] = {"step_median_s": interleaved({"s": call}, repeat=10, warmup=2)["s"][
            "median_s"]}
    out["swan"].update(_epochs(_peptides(quick), "device", epochs))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.reference_pytorch",
                                description=__doc__.split("\n")[0])
    p.add_argument("--ref", type=Path, required=True,
                   help="the authors' graph_property_prediction/models/swan.py")
    p.add_argument("--data", type=Path, default=None,
                   help="Peptides-func splits as swan-jax .npz files (DIR/{train,val,test}"
                        ".npz); default: loaded with swan-jax")
    p.add_argument("--rounds", type=int, default=3, help="epochs timed per model")
    p.add_argument("--quick", action="store_true", help="600 graphs per split (a smoke run)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/reference_pytorch.json"))
    p.add_argument("--graphprop-epochs", type=Path, default=None, metavar="DATA.npz",
                   help="serve benchmarks.epoch_anatomy --grid: one authors' GraphProp epoch "
                        "per stdin line (see above)")
    p.add_argument("--threads", type=int, default=2, help="--graphprop-epochs: torch threads")
    args = p.parse_args(argv)
    if not args.ref.is_file():
        p.error(f"--ref {args.ref}: no such file (the authors' models/swan.py)")
    try:
        import torch
    except ImportError:
        p.error("torch and torch_geometric are needed for the reference (pip install torch "
                "torch_geometric)")
    if args.graphprop_epochs is not None:
        serve_graphprop_epochs(load_reference(args.ref), args.graphprop_epochs, args.threads)
        return 0
    arrays = _splits(args.data, args.quick)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = load_reference(args.ref)
    splits = {k: pyg_graphs(v) for k, v in arrays.items()}
    result = {"device": device, "torch": torch.__version__, "patches": PATCHES,
              "graphs": {k: len(v) for k, v in splits.items()},
              "reference": time_reference(module, splits, device, args.rounds)}
    try:
        result["swan_jax"] = time_ours(args.quick, args.rounds + 1)
        ref, ours = result["reference"]["swan"], result["swan_jax"]["swan"]
        result["ratios"] = {"step_ref_over_ours": ref["step_median_s"] / ours["step_median_s"],
                            "epoch_ref_over_ours": ref["epoch_with_eval_median_s"]
                            / ours["epoch_s"]}
    except ImportError as err:
        result["swan_jax"] = f"not timed: {err} (run where jax is installed for the ratios)"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=float))
    print(json.dumps(result, indent=1, default=float))
    return 0


def _splits(folder: Path | None, quick: bool) -> dict[str, dict[str, np.ndarray]]:
    """Each split's arrays: from `folder`'s .npz files, or loaded (and featurised) by
    swan-jax."""
    limit = 600 if quick else None
    if folder is not None:
        return {s: {k: v[:limit] if k in ("n_node", "n_edge", "graph_targets") and limit
                    else v for k, v in np.load(folder / f"{s}.npz").items()}
                for s in ("train", "val", "test")}
    import os

    from swan_jax.data import load_peptides_func

    data_dir = os.environ.get("SWAN_DATA_DIR", "data")
    splits = load_peptides_func(data_dir, download=False, progress=False, limit=limit)
    return {s: {k: getattr(d, k) for k in ("nodes", "senders", "receivers", "n_node",
                                           "n_edge", "graph_targets")}
            for s, d in splits.items()}


if __name__ == "__main__":
    raise SystemExit(main())
