"""Spectra of linearised graph ODEs and the dissipativity verdict.

Paper Sec. "Mathematical Background": the real parts of the Jacobian's eigenvalues decide
between instability (> 0), dissipation (< 0) and non-dissipativity (= 0). For swan and
swan-learn `M2 + gamma I` is antisymmetric, so `Re(lambda(M2)) = -gamma` exactly
(docs/conventions.md "Jacobian facts"; the shift gamma of Appendix A.1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from swan_jax.analysis.jacobians import jacobian_factors
from swan_jax.analysis.trained import encoded_input, swan_field_params
from swan_jax.config import SWANConfig
from swan_jax.field import Params
from swan_jax.models import Model

Array = jax.Array


def spectrum(matrix: Array | np.ndarray) -> np.ndarray:
    """Eigenvalues of a square `[n, n]` matrix (NumPy, float64/complex128 on the host): `[n]`."""
    return np.linalg.eigvals(np.asarray(matrix, dtype=np.float64))


@dataclasses.dataclass(frozen=True)
class DissipativitySummary:
    """Where the spectrum of a linearised graph ODE lies (paper Sec. "Mathematical Background").

    Attributes:
      name: label of the model (e.g. the variant).
      gamma: the stabilising shift, as the matrices saw it (cast to their dtype).
      max_abs_real_shift: `max |Re(lambda(M2)) + gamma|`; round-off for swan, swan-learn.
      max_abs_real_shift_jacobian: `max |Re(lambda(J)) + gamma|` for `J = M1 M2`. Round-off
        only when gamma = 0 or `M1 = I`: otherwise `Re(lambda(J))` lies in
        `[-gamma max(M1), -gamma min(M1)]` (congruence with `M1^1/2 M2 M1^1/2`).
      real_range: `(min, max)` of `Re(lambda(M2))`.
      real_range_jacobian: `(min, max)` of `Re(lambda(J))`.
      jacobian_band_violation: how far `Re(lambda(J))` strays outside
        `[-gamma max(M1), -gamma min(M1)]` (round-off when M2 + gamma I is antisymmetric).
      tolerance: round-off level for the verdict, `100 eps max(1, ||M2||_F)`.
    """

    name: str
    gamma: float
    max_abs_real_shift: float
    max_abs_real_shift_jacobian: float
    real_range: tuple[float, float]
    real_range_jacobian: tuple[float, float]
    jacobian_band_violation: float
    tolerance: float

    @property
    def non_dissipative(self) -> bool:
        """All eigenvalues of M2 on `Re = -gamma` up to round-off."""
        return self.max_abs_real_shift <= self.tolerance

    @property
    def verdict(self) -> str:
        if self.non_dissipative:
            return "non-dissipative"
        low, high = self.real_range
        if high > self.tolerance:
            return f"unstable: max Re(lambda(M2)) = {high:+.2g}"
        return f"dissipative: Re(lambda(M2)) in [{low:.2g}, {high:.2g}]"

    def __str__(self) -> str:
        return (f"{self.name}: max |Re(lambda(M2)) + gamma| = {self.max_abs_real_shift:.1e} "
                f"({self.verdict})")


def summarize_spectrum(
    name: str,
    m2: Array | np.ndarray,
    gamma: float = 0.0,
    m1_diagonal: Array | np.ndarray | None = None,
    tolerance: float | None = None,
) -> DissipativitySummary:
    """`DissipativitySummary` of `J = diag(m1_diagonal) M2` (`M1 = I` when omitted).

    `m2` is `[n, n]`, `m1_diagonal` `[n]`. Any linear(ised) graph ODE fits: e.g. diffusion,
    `M2 = heat_jacobian(...)`, gamma 0.
    """
    m2_host = np.asarray(m2)
    dtype = m2_host.dtype if np.issubdtype(m2_host.dtype, np.floating) else np.float64
    gamma = float(np.asarray(gamma, dtype=dtype))  # the shift the matrix actually holds
    slope = (np.ones(m2_host.shape[0]) if m1_diagonal is None
             else np.asarray(m1_diagonal, np.float64))
    eig_m2 = spectrum(m2_host)
    eig_j = spectrum(slope[:, None] * np.asarray(m2_host, np.float64))
    if tolerance is None:
        scale = max(1.0, float(np.linalg.norm(np.asarray(m2_host, np.float64))))
        tolerance = 100.0 * float(np.finfo(dtype).eps) * scale
    band_low, band_high = -gamma * slope.max(), -gamma * slope.min()
    band_violation = np.maximum(np.maximum(band_low - eig_j.real, eig_j.real - band_high), 0.0)
    return DissipativitySummary(
        name=name,
        gamma=gamma,
        max_abs_real_shift=float(np.max(np.abs(eig_m2.real + gamma))),
        max_abs_real_shift_jacobian=float(np.max(np.abs(eig_j.real + gamma))),
        real_range=(float(eig_m2.real.min()), float(eig_m2.real.max())),
        real_range_jacobian=(float(eig_j.real.min()), float(eig_j.real.max())),
        jacobian_band_violation=float(band_violation.max()),
        tolerance=float(tolerance),
    )


def dissipativity_summary(
    params: Params,
    graph: jraph.GraphsTuple,
    x: Array,
    cfg: SWANConfig,
    x0: Array | None = None,
    *,
    t: Array | float = 0.0,
    name: str | None = None,
    tolerance: float | None = None,
) -> DissipativitySummary:
    """Is the SWAN block non-dissipative at state `x` `[N, d]`? (docs/conventions.md
    "Jacobian facts").

    Prints as one line, e.g.
    `swan: max |Re(lambda(M2)) + gamma| = 3.1e-16 (non-dissipative)`.
    Round-off for swan and swan-learn (any precision: `M2 + gamma I` is exactly
    antisymmetric in floating point); not for swan-ne, swan-learn-ne, adgn.
    """
    m1, m2 = jacobian_factors(params, graph, x, cfg, x0, t=t)
    return summarize_spectrum(name or cfg.variant, m2, cfg.gamma, jnp.diagonal(m1), tolerance)


def model_dissipativity_summary(
    model: Model, variables: Mapping[str, Any], graph: jraph.GraphsTuple, **kwargs: Any
) -> DissipativitySummary:
    """`dissipativity_summary` of a `sj.Model` whose processor is a `sj.SWANBlock`, at `x(0)`.

    Keep `graph` small (one graph): the spectrum is dense in `N d`.
    """
    x0 = encoded_input(model, variables, graph)
    cfg = model.processor.cfg
    return dissipativity_summary(swan_field_params(variables), graph, x0, cfg, x0, **kwargs)
