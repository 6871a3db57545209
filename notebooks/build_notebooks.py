"""Write the analysis notebooks (outputs stripped): `python notebooks/build_notebooks.py`.

The notebooks are generated from this file so that their code stays reviewable as Python;
edit here, rerun, and commit the `.ipynb` files with no outputs.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


IMPORTS = '''
import os

import jax

jax.config.update("jax_enable_x64", True)  # eigenvalue checks at float64 round-off
import jax.numpy as jnp
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np

import swan_jax as sj
from swan_jax import analysis as sja
'''

# --------------------------------------------------------------------------------------
EIGENVALUES = [
    md('''
# 1. Eigenvalues: where SWAN's spectrum lies, and where diffusion's does

The graph-wise Jacobian of SWAN is `J = M1 M2` (paper Sec. "SWAN is globally
non-dissipative", Appendix H; docs/conventions.md "Jacobian facts", column stacking
`vec(X) = X.T.reshape(-1)`):

* `M1 = diag(vec(sigma'(pre-activation)))`, a positive diagonal for tanh;
* `M2 = (W - W^T - gamma I)^T (x) I + (V - V^T)^T (x) (A_hat + A_hat^T)
  + beta (Z + Z^T)^T (x) (A_tilde - A_tilde^T)`.

`M2 + gamma I` is a sum of antisymmetric matrices, so every eigenvalue of `M2` has real
part exactly `-gamma`: SWAN is non-dissipative up to the stabilising shift `gamma`.
The non-enforced variant **swan-ne** (`A_hat X V`, `V` unconstrained) and **ADGN** lose
this in space; **swan-beta0** keeps it (no `Psi`). The **diffusion** baseline
`dX/dt = -L X` (normalised Laplacian) has a real, non-positive spectrum: it dissipates.

Below: the spectra of `M2` (circles) and `J` (crosses) for each model on a ring and on a
random graph, at a random state `X`.
'''),
    code('''
# The one knob: "small" runs in seconds (the test suite uses it); "large" fills the plots.
SIZE = "small"
N_NODES, WIDTH = {"small": (12, 4), "large": (40, 8)}[SIZE]
GAMMA, BETA, SEED = 0.1, 1.0, 0
'''),
    code(IMPORTS),
    code('''
# As many edges as the ring (the same array shapes, so JAX compiles each step once), but
# unequal degrees: on the ring A_tilde - A_tilde^T = 0 and the Psi term vanishes.
random_nx = nx.gnm_random_graph(N_NODES, N_NODES, seed=SEED)
GRAPHS = {
    "ring": sja.ring_graph(N_NODES),
    "random graph": sja.undirected_graph(list(random_nx.edges()), N_NODES),
}
state = 0.5 * jax.random.normal(jax.random.PRNGKey(SEED), (N_NODES, WIDTH), jnp.float64)
VARIANTS = ["swan", "swan-ne", "swan-beta0", "adgn"]

spectra, summaries = {}, {}
for graph_name, graph in GRAPHS.items():
    for variant in VARIANTS:
        cfg = sj.SWANConfig(variant=variant, gamma=GAMMA, beta=BETA)
        params = sj.init_params(jax.random.PRNGKey(SEED + 1), WIDTH, cfg, jnp.float64)
        m1, m2 = sja.jacobian_factors(params, graph, state, cfg)
        jacobian = sja.graph_jacobian(params, graph, state, cfg)  # jax.jacfwd of the field
        assert np.allclose(jacobian, m1 @ m2, atol=1e-12)  # J = M1 M2
        spectra[graph_name, variant] = (sja.spectrum(m2), sja.spectrum(jacobian))
        summaries[graph_name, variant] = sja.summarize_spectrum(
            variant, m2, cfg.gamma, jnp.diagonal(m1))
    heat = sja.heat_jacobian(graph, N_NODES, WIDTH, dtype=jnp.float64)  # -(I (x) L)
    spectra[graph_name, "diffusion"] = (sja.spectrum(heat), sja.spectrum(heat))
    summaries[graph_name, "diffusion"] = sja.summarize_spectrum("diffusion", heat)

for (graph_name, _), summary in summaries.items():
    print(f"{graph_name:>12} | {summary}")
'''),
    code('''
models = VARIANTS + ["diffusion"]
fig, axes = plt.subplots(len(GRAPHS), len(models), figsize=(3.6 * len(models), 3.6 * len(GRAPHS)),
                         squeeze=False, layout="constrained")
for row, graph_name in enumerate(GRAPHS):
    for col, model in enumerate(models):
        ax = axes[row, col]
        eig_m2, eig_j = spectra[graph_name, model]
        ax.axvline(0.0, color="0.7", lw=0.8)
        ax.axhline(0.0, color="0.7", lw=0.8)
        if model != "diffusion":
            ax.axvline(-GAMMA, color="tab:red", ls="--", lw=1, label="Re = -gamma")
        ax.scatter(eig_m2.real, eig_m2.imag, s=28, facecolors="none", edgecolors="tab:blue",
                   label="lambda(M2)")
        ax.scatter(eig_j.real, eig_j.imag, s=14, marker="x", color="tab:orange",
                   label="lambda(J = M1 M2)")
        ax.set_title(f"{model} on the {graph_name}", fontsize=10)
        ax.set_xlabel("Re(lambda)")
        ax.set_ylabel("Im(lambda)")
fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncol=3)
fig.suptitle(f"Jacobian spectra (N = {N_NODES}, d = {WIDTH}, gamma = {GAMMA}): SWAN's M2 on "
             "Re = -gamma, diffusion on the negative real axis")
plt.show()
'''),
    md('''
**Reading the plots.** For `swan` and `swan-beta0` every circle sits on the dashed line
`Re = -gamma` (the summary lines above give the distance: float64 round-off). The crosses of
`J = M1 M2` stay in the band `[-gamma max(M1), -gamma min(M1)]`, with real part exactly 0
when `gamma = 0`. `swan-ne` and `adgn` spread their eigenvalues across the real axis, some to
the right of `-gamma` (growing modes) and some to the left (dissipated modes); on the ring
every node has the same degree, so `A_tilde - A_tilde^T = 0`, `Psi` vanishes and swan-ne
coincides with adgn there. Diffusion's eigenvalues are real and `<= 0`.

## Is my trained model non-dissipative?

Three lines for any `sj.Model(encoder, sj.SWANBlock(cfg), readout)` and its variables
(a fresh model stands in here; `sja.load_checkpoint_params(directory)` restores one saved by
`swan_jax.train`):
'''),
    code('''
graph = GRAPHS["random graph"]._replace(nodes=jnp.ones((N_NODES, 1)))  # one small graph
model = sj.Model(sj.LinearEncoder(WIDTH), sj.SWANBlock(sj.SWANConfig(gamma=GAMMA)),
                 sj.NodeReadout((1,)))
variables = model.init(jax.random.PRNGKey(SEED), graph)
print(sja.model_dissipativity_summary(model, variables, graph))
'''),
]

# --------------------------------------------------------------------------------------
INFORMATION_FLOW = [
    md('''
# 2. Information flow: how far a perturbation of one node travels

The sensitivity `||d x_v(l) / d x_u(0)||` of node `v` after `l` layers to the input of a
source node `u` (paper Sec. "The Benefit of Spatial Antisymmetry", Theorem 3.3; small values
at distant nodes mean over-squashing). Theorem 3.1: SWAN's global rate
`||d vec X(t) / d vec X(0)||` is constant in time; Theorem 3.2: diffusion's decays
exponentially. Figure 1 of the paper sketches the picture; here it is measured.

`sja.sensitivity` pushes the `d` basis tangents of node `u` through
`sj.solve(..., save_trajectory=True)` with forward-mode JVPs, so it never forms the
`[N d, N d]` Jacobian. Models: **SWAN** (space and weight antisymmetric), **ADGN**
(weight antisymmetric only) and **diffusion** (`dX/dt = -L X`, normalised Laplacian, the same
Euler steps), on a line and a ring, the source at one end of the line.
'''),
    code('''
# The one knob: "small" runs in seconds (the test suite uses it); "large" goes further.
SIZE = "small"
N_NODES, WIDTH, LAYERS = {"small": (10, 4, 60), "large": (30, 8, 200)}[SIZE]
EPSILON, GAMMA, BETA, SEED = 0.1, 0.05, 1.0, 0
'''),
    code(IMPORTS),
    code('''
# Line and ring as two components of one graph: one compiled program serves both.
line_edges = [(i, i + 1) for i in range(N_NODES - 1)]
ring_edges = [(N_NODES + i, N_NODES + (i + 1) % N_NODES) for i in range(N_NODES)]
graph = sja.undirected_graph(line_edges + ring_edges, 2 * N_NODES)
COMPONENTS = {"line": (0, np.arange(N_NODES)), "ring": (N_NODES, N_NODES + np.arange(N_NODES))}
x0 = 0.1 * jax.random.normal(jax.random.PRNGKey(SEED), (2 * N_NODES, WIDTH), jnp.float64)

def heat(x):
    return sja.heat_trajectory(graph, x, EPSILON, LAYERS)

sensitivities = {}  # (model, graph) -> [L + 1, N]
for model in ["diffusion", "ADGN", "SWAN"]:
    if model != "diffusion":
        variant = "swan" if model == "SWAN" else "adgn"
        cfg = sj.SWANConfig(variant=variant, gamma=GAMMA, beta=BETA, epsilon=EPSILON,
                            num_layers=LAYERS)
        params = sj.init_params(jax.random.PRNGKey(SEED + 1), WIDTH, cfg, jnp.float64)
    for graph_name, (source, nodes) in COMPONENTS.items():
        if model == "diffusion":
            sens = sja.sensitivity(None, None, x0, None, source, trajectory_fn=heat)
        else:
            sens = sja.sensitivity(params, graph, x0, cfg, source)
        sensitivities[model, graph_name] = np.asarray(sens)[:, nodes]

hops = {name: sja.hop_distances(graph, source)[nodes]
        for name, (source, nodes) in COMPONENTS.items()}
print(f"sensitivity of the farthest node after {LAYERS} layers (t = {LAYERS * EPSILON:g}):")
for (model, graph_name), sens in sensitivities.items():
    far = np.argmax(hops[graph_name])
    total = np.linalg.norm(sens, axis=1)
    print(f"  {model:>9} on the {graph_name}: {sens[-1, far]:.2e} at {hops[graph_name][far]} hops;"
          f"  total ||dX(l)/dx_u(0)||: {total[0]:.2f} -> {total[-1]:.2f}")
'''),
    code('''
FLOOR = 1e-12  # log-scale floor: exact zeros (not yet reached) are drawn at the floor
models = ["diffusion", "ADGN", "SWAN"]
fig, axes = plt.subplots(2, 3, figsize=(13, 7), sharey=True, layout="constrained")
for row, graph_name in enumerate(COMPONENTS):
    distance = hops[graph_name]
    for col, model in enumerate(models):
        sens = sensitivities[model, graph_name]
        by_hop = np.stack([sens[:, distance == k].mean(axis=1) for k in range(distance.max() + 1)],
                          axis=1)
        image = axes[row, col].imshow(np.log10(np.maximum(by_hop, FLOOR)), aspect="auto",
                                      origin="lower", cmap="viridis", vmin=-8, vmax=0.5,
                                      extent=(-0.5, distance.max() + 0.5, 0, LAYERS))
        axes[row, col].set_title(f"{model} on the {graph_name}")
        axes[row, col].set_xlabel("hop distance from the source")
        axes[row, 0].set_ylabel("layer l")
fig.colorbar(image, ax=axes, label="log10 ||d x_v(l) / d x_u(0)||")
fig.suptitle("Sensitivity to the source node, by hop distance (x) and depth (y)")
plt.show()
'''),
    code('''
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
layers = np.arange(LAYERS + 1)
for graph_name, style in zip(COMPONENTS, ["-", "--"]):
    far = np.argmax(hops[graph_name])
    for model, color in zip(models, ["tab:gray", "tab:blue", "tab:red"]):
        sens = sensitivities[model, graph_name]
        axes[0].semilogy(layers, np.maximum(sens[:, far], FLOOR), style, color=color,
                         label=f"{model}, {graph_name}")
        axes[1].plot(layers, np.linalg.norm(sens, axis=1), style, color=color,
                     label=f"{model}, {graph_name}")
axes[0].set_title("Farthest node: ||d x_v(l) / d x_u(0)||")
axes[0].set_xlabel("layer l")
axes[0].set_ylabel("sensitivity (log scale)")
axes[1].set_title("Whole graph: ||d X(l) / d x_u(0)||_F  (Theorems 3.1 / 3.2)")
axes[1].set_xlabel("layer l")
axes[1].set_ylabel("sensitivity")
axes[1].legend(fontsize=8)
fig.tight_layout()
plt.show()
'''),
    code('''
fig, axes = plt.subplots(2, 3, figsize=(13, 6), layout="constrained")
cmap = plt.get_cmap("viridis")
for row, (graph_name, (source, nodes)) in enumerate(COMPONENTS.items()):
    component = nx.path_graph(N_NODES) if graph_name == "line" else nx.cycle_graph(N_NODES)
    positions = ({v: (v, 0.0) for v in range(N_NODES)} if graph_name == "line"
                 else nx.circular_layout(component))
    for col, model in enumerate(models):
        ax = axes[row, col]
        colours = np.log10(np.maximum(sensitivities[model, graph_name][-1], 1e-4))
        nx.draw_networkx_edges(component, positions, ax=ax, edge_color="0.6")
        drawn = nx.draw_networkx_nodes(component, positions, ax=ax, node_color=colours,
                                       cmap=cmap, vmin=-4, vmax=0.5, node_size=160)
        nx.draw_networkx_nodes(component, positions, nodelist=[0], ax=ax, node_color="none",
                               edgecolors="tab:red", linewidths=2.5, node_size=260)
        ax.set_title(f"{model} on the {graph_name}, layer {LAYERS}")
        ax.set_axis_off()
fig.colorbar(drawn, ax=axes, label="log10 ||d x_v(L) / d x_u(0)||  (source circled red)",
             extend="min")
fig.suptitle("Where the source's information is after the last layer")
plt.show()
'''),
    md('''
**Reading the plots.** Diffusion spreads the source's input but its whole-graph sensitivity
falls layer after layer (Theorem 3.2): the signal is averaged away. ADGN does not dissipate
either, but what reaches distant nodes stays well below SWAN's, whose antisymmetric
aggregation in space and weights carries the source's input across the graph (Theorem 3.1;
with forward Euler, tanh and `gamma > 0` the total is not exactly constant, but it does not
decay). Exact numbers depend on the random weights: change `SEED` to see the spread.

## Is my trained model non-dissipative?

Three lines for any `sj.Model(encoder, sj.SWANBlock(cfg), readout)` and its variables
(a fresh model stands in; `sja.load_checkpoint_params(directory)` restores a trained one):
'''),
    code('''
ring = sja.ring_graph(N_NODES)._replace(nodes=jnp.ones((N_NODES, 1)))
model = sj.Model(sj.LinearEncoder(WIDTH), sj.SWANBlock(sj.SWANConfig(gamma=GAMMA)),
                 sj.NodeReadout((1,)))
variables = model.init(jax.random.PRNGKey(SEED), ring)
print(sja.model_dissipativity_summary(model, variables, ring))
'''),
]

# --------------------------------------------------------------------------------------
JACOBIAN_DRIFT = [
    md('''
# 3. Does the Jacobian stay put? SWAN against GCN over layers (paper Appendix I)

Theorems 3.1 and 3.2 treat the Jacobian `J(t)` as roughly constant in time. Appendix I
checks this on a trained model by the relative change between consecutive layers,
`||J(l) - J(l-1)|| / ||J(l-1)||`: about 0.6% per layer for SWAN against 40% for GCN on
peptides-func. Here: the Jacobian of SWAN's field at each layer's state, against the
Jacobian of each GCN layer map at its input, for models trained on a small transfer task
(and SWAN's own layer maps `I + epsilon J(l)`, the like-for-like comparison).

Set `CHECKPOINT` (or the environment variable `SWAN_CHECKPOINT`) to a
`swan_jax.train` checkpoint directory to analyse a trained SWAN instead of the short
training run below; `MODEL_CFG`, `HIDDEN` and the one input feature must then match how it
was trained.
'''),
    code('''
# The one knob: "small" trains for seconds (the test suite uses it); "large" for longer.
SIZE = "small"
N_NODES, HIDDEN, LAYERS, STEPS = {"small": (10, 8, 8, 100), "large": (24, 16, 16, 1500)}[SIZE]
HOPS = 3  # each node must predict the input of the node HOPS steps along the ring
EPSILON, GAMMA, BETA, SEED, LEARNING_RATE = 0.2, 0.1, 1.0, 0, 3e-3
CHECKPOINT = __import__("os").environ.get("SWAN_CHECKPOINT", "")  # empty: train here
RUN = 0  # which of the checkpoint's vmapped runs
'''),
    code(IMPORTS.replace('jax.config.update("jax_enable_x64", True)  # eigenvalue checks at '
                         'float64 round-off\n', '') + '''import optax
'''),
    code('''
graph = sja.ring_graph(N_NODES)
target_of = (np.arange(N_NODES) + HOPS) % N_NODES

def make_batch(key, size):
    features = jax.random.uniform(key, (size, N_NODES, 1))
    return features, features[:, target_of]

train_x, train_y = make_batch(jax.random.PRNGKey(SEED), 64)
test_x, test_y = make_batch(jax.random.PRNGKey(SEED + 1), 16)
MODEL_CFG = sj.SWANConfig(gamma=GAMMA, beta=BETA, epsilon=EPSILON, num_layers=LAYERS)
swan_model = sj.Model(sj.LinearEncoder(HIDDEN), sj.SWANBlock(MODEL_CFG),
                      sj.NodeReadout((HIDDEN, 1)))
gcn_model = sj.Model(sj.LinearEncoder(HIDDEN), sj.MPNNStack("gcn", HIDDEN, LAYERS),
                     sj.NodeReadout((HIDDEN, 1)))

def predict(model, variables, features):  # [B, N, 1] -> [B, N, 1], one graph per draw
    return jax.vmap(lambda f: model.apply(variables, graph._replace(nodes=f)))(features)

def fit(model):
    variables = model.init(jax.random.PRNGKey(SEED), graph._replace(nodes=train_x[0]))
    optimiser = optax.adam(LEARNING_RATE)
    opt_state = optimiser.init(variables)

    @jax.jit
    def step(variables, opt_state):
        loss_fn = lambda v: jnp.mean((predict(model, v, train_x) - train_y) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(variables)
        updates, opt_state = optimiser.update(grads, opt_state)
        return optax.apply_updates(variables, updates), opt_state, loss

    for _ in range(STEPS):
        variables, opt_state, loss = step(variables, opt_state)
    test_loss = jnp.mean((predict(model, variables, test_x) - test_y) ** 2)
    print(f"{type(model.processor).__name__}: train MSE {loss:.4f}, test MSE {test_loss:.4f}"
          f" (predicting the mean gives {jnp.var(test_y):.4f})")
    return variables

if CHECKPOINT:
    swan_variables = sja.load_checkpoint_params(CHECKPOINT, run=RUN)
    print(f"SWAN restored from {CHECKPOINT}, run {RUN}")
else:
    swan_variables = fit(swan_model)
gcn_variables = fit(gcn_model)
'''),
    code('''
drifts = {"SWAN field J(l)": [], "SWAN layer map I + eps J(l)": [], "GCN layer map": []}
for features in test_x[:4]:  # a few test inputs, averaged
    g = graph._replace(nodes=features)
    x0 = sja.encoded_input(swan_model, swan_variables, g)
    field_jacobians = sja.swan_layer_jacobians(sja.swan_field_params(swan_variables), graph, x0,
                                               MODEL_CFG)
    drifts["SWAN field J(l)"].append(sja.jacobian_drift(field_jacobians))
    layer_map_jacobians = jnp.eye(field_jacobians.shape[-1]) + EPSILON * field_jacobians
    drifts["SWAN layer map I + eps J(l)"].append(sja.jacobian_drift(layer_map_jacobians))
    x0 = sja.encoded_input(gcn_model, gcn_variables, g)
    layer_maps = sja.mpnn_layer_maps(gcn_model.processor, gcn_variables["params"]["processor"],
                                     graph)
    drifts["GCN layer map"].append(sja.jacobian_drift(sja.layer_map_jacobians(layer_maps, x0)))
drifts = {name: np.mean(values, axis=0) for name, values in drifts.items()}
print("mean relative change of the Jacobian per layer:")
for name, drift in drifts.items():
    print(f"  {name:>28}: {100 * drift.mean():.1f}%")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
layers = np.arange(1, LAYERS)
for ax, scale in zip(axes, ["linear", "log"]):
    for (name, drift), style in zip(drifts.items(), ["o-", "^--", "s-"]):
        colour = "tab:gray" if name.startswith("GCN") else "tab:red"
        ax.plot(layers, drift, style, color=colour, label=name)
    ax.set_yscale(scale)
    ax.set_xlabel("layer l")
    ax.set_ylabel("||J(l) - J(l-1)||_F / ||J(l-1)||_F")
    ax.set_title(f"Relative change of the Jacobian ({scale} scale)")
axes[0].legend()
fig.tight_layout()
plt.show()
'''),
    md('''
**Reading the plot.** SWAN shares one set of weights across layers and moves its state by
`epsilon f(X)` per layer, so only `M1 = sigma'(...)` changes along the way; each GCN layer
has its own weights, and its Jacobian changes by about its own size from one layer to the
next. Like for like (a layer map against a layer map), SWAN's Euler layer `I + epsilon J(l)`
barely moves. How much the field Jacobian `J(l)` itself moves depends on how saturated tanh
is in the trained model: larger weights and larger `epsilon` move it more. The paper's
Appendix I reports 0.6% for SWAN and 40% for GCN on peptides-func.

## Is my trained model non-dissipative?
'''),
    code('''
test_graph = graph._replace(nodes=test_x[0])
print(sja.model_dissipativity_summary(swan_model, swan_variables, test_graph))
'''),
]

# --------------------------------------------------------------------------------------
TRAINING_RUNS = [
    md('''
# 4. Training runs: train through the sweep, read the history, open a run

Every experiment runs through one sweep (`swan_jax.experiments`). Each program (one
compiled, vmapped training of every grid point x seed of a cell) gets a folder holding
`run.json` (its full configuration and the map run -> grid point, seed), `history.jsonl`
(one line per epoch) and its checkpoints. This notebook trains a small graph-transfer
cell (a value must travel 3 hops across a crossed ring, where unequal degrees make
`beta` matter) with two values of `beta` and two seeds,
draws the training curves, and reopens a trained run with `load_run` to ask whether it is
non-dissipative, without repeating any of its settings.
'''),
    code('''
# The one knob: "small" trains for seconds (the test suite uses it); "large" for longer.
SIZE = "small"
EPOCHS, SEEDS, TRAIN_GRAPHS = {"small": (4, (0, 1), 16), "large": (300, (0, 1, 2, 3), 1000)}[SIZE]
'''),
    code('''
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import swan_jax as sj
from swan_jax.experiments import load_run, plot_curves, read_history, run_sweep, transfer
from swan_jax.experiments.runs import program_folders

RESULTS = Path(tempfile.mkdtemp(prefix="swan-runs-"))  # e.g. Path("results/notebook") to keep it
'''),
    md('''
## Train one cell through the sweep

The configuration starts from the experiment's packaged protocol
(`swan_jax/experiments/configs/transfer.toml`) and changes what a quick run needs; the
sweep writes `results.json`, `table.md`, the figure and the resolved `config.toml` into
`RESULTS`.
'''),
    code('''
cfg = transfer.EXPERIMENT.default_config(
    topologies=("crossed-ring",), distances=(3,), models=("swan",), seeds=SEEDS,
    epochs=EPOCHS, patience=None, hidden=16, sizes=(TRAIN_GRAPHS, 8, 8), progress=False,
    results_dir=RESULTS, cache_dir=RESULTS / "cache",
    grid={"learning_rate": (1e-3,), "epsilon": (0.5,), "gamma": (0.1,), "beta": (1.0, -1.0),
          "adjacency": ("sym",)})
outcome = run_sweep(transfer.EXPERIMENT, cfg)
cell = outcome.cells[0]
print(f"best of {cell['grid_points']} grid points: {cell['best_hparams']}, "
      f"test MSE {cell['test_mean']:.4f} +- {cell['test_std']:.4f} over seeds {cell['seeds']}")
'''),
    md('''
## The history of every epoch

One line per epoch: per run (grid point x seed, in the order of `run.json`) the training
loss, the validation and test metrics and the learning rate; the seconds of the epoch.
'''),
    code('''
[folder] = program_folders(RESULTS)
history = read_history(folder)
print(folder.relative_to(RESULTS))
print(f"{len(history)} epochs; last: train loss {np.round(history[-1]['train_loss'], 4)}, "
      f"val MSE {np.round(history[-1]['val'], 4)}")

epochs = [h["epoch"] + 1 for h in history]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), layout="constrained")
for key, ax in zip(("train_loss", "val"), axes):
    values = np.asarray([h[key] for h in history])  # [epochs, runs]
    for run in range(values.shape[1]):
        ax.plot(epochs, values[:, run], marker="o", label=f"run {run}")
    ax.set_xlabel("epoch")
    ax.set_title({"train_loss": "training loss (MSE)", "val": "validation MSE"}[key])
axes[1].legend(fontsize=8)
plt.show()
print("the same for a whole results folder:", plot_curves(RESULTS).name)  # swan-curves RESULTS
'''),
    md('''
## Open a trained run

`load_run(folder, run)` rebuilds the model of that run's grid point from `run.json` and
restores its best parameters; `config` says everything the run was trained with. The
experiment's own loader, given that configuration, gives back its data: one
`GraphDataset` per split, whose `dataset[i]` is graph `i` as a `jraph.GraphsTuple`.
'''),
    code('''
best = int(np.argmin(history[-1]["val"]))
model, variables, config = load_run(folder, best)
print(f"run {best}: seed {config['seed']}, {config['hparams']}")
test = transfer.EXPERIMENT.load_data(config["config"], config["cell"])["test"]  # a GraphDataset
graph = test[0]  # the first test graph, unpadded: a one-graph jraph.GraphsTuple
print(f"{len(test)} test graphs; graph 0: {int(graph.n_node[0])} nodes, "
      f"{int(graph.n_edge[0])} edges")
'''),
    md('''
## Is my trained model non-dissipative?
'''),
    code('''
print(sj.analysis.model_dissipativity_summary(model, variables, graph))
'''),
]


def write(name: str, cells) -> None:
    notebook = new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC,
                                                   "language_info": {"name": "python"}})
    for index, cell in enumerate(notebook.cells):
        cell.id = f"{Path(name).stem}-{index}"  # stable ids: regenerating gives no diff
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(notebook)
    nbformat.write(notebook, HERE / name)


if __name__ == "__main__":
    write("01_eigenvalues.ipynb", EIGENVALUES)
    write("02_information_flow.ipynb", INFORMATION_FLOW)
    write("03_jacobian_drift.ipynb", JACOBIAN_DRIFT)
    write("04_training_runs.ipynb", TRAINING_RUNS)
