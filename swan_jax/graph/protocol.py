"""The one protocol between the graph and the rest of swan-jax: `GraphOps`.

SWAN's field and the baselines need a handful of graph operations: degrees, the operators
`A_hat`, `A_tilde` and their symmetric / antisymmetric parts applied to node states, a
(scaled) sum over in-neighbours, attention over them, and the inputs of SWAN-learn's edge
MLP. Each graph layout implements them once:

* `swan_jax.graph.segment.SegmentGraph`: a `jraph.GraphsTuple`; edge weights and segment
  sums (the reference path);
* `swan_jax.graph.slots.SlotGraph`: a `PreparedGraph`; slot values and gathers only.

`swan_jax.graph.as_operator(graph)` picks the layout once per graph; callers (the field,
the models, analysis) use the operations below and never ask which layout they hold.
The two layouts compute the same numbers up to rounding, each in its own order of
operations (the tests compare them with each other and with `tests/reference.py`).

Shapes: `N` nodes; a *pair* is an edge `v -> u` of a GraphsTuple (`[E]`) or a listed
pair `(u <- v)` of a prepared graph (`[P]`, parallel edges folded into one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeAlias

import jax
import jax.numpy as jnp
import jraph

from swan_jax.graph.prepared import PreparedGraph

Array = jax.Array
Graph: TypeAlias = jraph.GraphsTuple | PreparedGraph  # the one alias of "a graph" in swan-jax

# Parts of SWAN's operators a `Term` can apply (names of the paper / conventions):
# "hat": A_hat;  "phi": A_hat + A_hat^T (symmetric);  "psi": A_tilde - A_tilde^T (antisymmetric).
PARTS: tuple[str, ...] = ("hat", "phi", "psi")


class Term(NamedTuple):
    """One graph term `scale * (O X M)` of a `GraphOps.mix`.

    Attributes:
      part: which operator `O` (one of `PARTS`).
      matrix: `M` `[d, c]`, applied to the node states.
      scale: a scalar multiplying the term, or None for 1.
    """

    part: str
    matrix: Array
    scale: Any = None


def safe_inverse(values: Array, power: float = 1.0) -> Array:
    """`values ** -power` where positive, 0 elsewhere (docs/conventions.md: 1/0 is taken as 0)."""
    positive = values > 0
    safe = jnp.where(positive, values, 1.0)
    return jnp.where(positive, safe ** (-power), 0.0)


# `A_hat`'s choice in its one form below the configuration: a code, 1 for `sym`
# (`D^-1/2 A D^-1/2`) and 0 for `adj` (`A`). The names are the user's (`SWANConfig`, the
# command line, TOML); `settings.traced_value` turns a name into its code.
ADJACENCY_CODES: dict[str, float] = {"sym": 1.0, "adj": 0.0}
ADJACENCIES: tuple[str, ...] = tuple(ADJACENCY_CODES)
AdjacencyCode: TypeAlias = float | Array  # known (a Python number) or traced (an array)


def adjacency_hat(code: AdjacencyCode, plain: Array, normalised: Callable[[], Array]
                  ) -> Array:
    """`A_hat`'s weights from `plain` (the binary or learned `A`): `normalised()`
    (`D^-1/2 A D^-1/2`) for code 1 (sym), `plain` for code 0 (adj).

    A code known at trace time (a Python number: a lone run, or a program of one
    adjacency) selects statically, so only its weights are computed. An array (traced:
    runs of both adjacencies batched in one program) computes both and selects per run,
    bit for bit the weights of the known code.

    Raises: `ValueError` for a name (the graph operations take its code,
    `ADJACENCY_CODES`) or a known number other than 1 and 0.
    """
    if isinstance(code, jax.Array):
        return jnp.where(code > 0.5, normalised(), plain)
    if isinstance(code, str):
        raise ValueError(f"the graph operations take the adjacency's code, not its name "
                         f"{code!r}: ADJACENCY_CODES[{code!r}]")
    if code not in ADJACENCY_CODES.values():
        raise ValueError(f"an adjacency code must be 1 (sym) or 0 (adj), got {code!r}")
    return normalised() if code == ADJACENCY_CODES["sym"] else plain


class GraphOps(Protocol):
    """The graph operations of SWAN and the baselines, implemented by each layout.

    `num_nodes` arguments are the static `N` of the node states (a prepared graph knows
    its own and ignores them); `dtype` the float type of the results.
    """

    @property
    def graph(self) -> Graph:
        """The graph itself."""

    def plain(self) -> jraph.GraphsTuple:
        """The GraphsTuple fields (edge lists) of the graph."""

    def validate(self) -> None:
        """Host checks of the graph (shapes, dtypes; index values where not traced)."""

    def check_states(self, x: Array) -> None:
        """Static checks of node states `x` `[N, ...]` against the graph (fine when traced)."""

    def check_traced(self, x: Array | None = None) -> None:
        """`checkify` checks of the graph's indices (work on traced graphs); node indices
        against the rows of `x` when given."""

    def in_degree(self, *, num_nodes: int, dtype: Any) -> Array:
        """`deg(u) = sum_v A[u, v]`, the edges received by `u`: `[N]`."""

    def operators(self, adjacency: AdjacencyCode, pair_weights: Array | None = None, *,
                  num_nodes: int, dtype: Any) -> Any:
        """`A_hat`, `A_tilde` (`adjacency` its code, known or traced: `adjacency_hat`;
        learned `F` from `pair_weights` `[pairs]`, else the binary adjacency), built once
        per solve, for `mix`."""

    def pair_linear(self, x: Array, kernel: Array) -> Array:
        """`[x_u ++ x_v] K` on every pair `(u <- v)`: `x [N, d]`, `K [2 d, h]` -> `[pairs, h]`."""

    def mix(self, ops: Any, x: Array, self_matrix: Array, bias: Array,
            terms: tuple[Term, ...]) -> Array:
        """`X S + b + sum_i scale_i O_i X M_i` with the operators `ops`: `[N, c]`."""

    def aggregate(self, x: Array, *, row_scale: Array | None = None,
                  neighbor_scale: Array | None = None) -> Array:
        """`diag(r) A diag(c) X`, the (scaled) sum over in-neighbours: `[N, d]` (`r`, `c`
        `[N]`, default 1)."""

    def attention(self, a_src: Array, a_dst: Array, h: Array) -> Array:
        """GAT's softmax over in-neighbours and the node itself, logits
        `leaky_relu(a_src[v] + a_dst[u], 0.2)`: `[N, d]`."""

    def store(self, tree: Any) -> Any:
        """`tree` stored once where the layout's compiler would otherwise recompute it per
        consumer (`gather.materialize` on slots; the identity on segments)."""
