"""What runs are selected by: a `Metric`, a score with a direction and a place to run.

    import jax.numpy as jnp
    from swan_jax.train import Metric, TrainConfig

    def rmse(pred, target, mask):  # pred [rows, T], target [rows, T'], mask [rows] bool
        err = jnp.where(mask[:, None], (pred - target) ** 2, 0.0)
        return jnp.sqrt(err.sum() / jnp.maximum(mask.sum() * pred.shape[1], 1))

    TrainConfig(metric=Metric(rmse, higher_is_better=False, on_device=True))

A metric scores one run on one whole split: `fn(pred, target, mask) -> scalar`, the same
signature as a loss. `on_device=True`: `fn` is traced with `jax.numpy` (jitted and vmapped
over runs) and gets the split's padded rows, `mask` False on padding (whose predictions
are zeros); only the scalars leave the device. `on_device=False` (the default): `fn` gets
NumPy arrays of the split's real rows only (`mask` all True), once per run and epoch
(scikit-learn's scores, anything host-side). `higher_is_better` (required) is the
direction early stopping, the plateau schedule and the choice of the best epoch and run
follow. The built-in names (`swan_jax.train.METRICS`) resolve to `Metric`s too
(`get_metric("ap")`); their scores are computed as before (sums reduced on the device
for the errors, host scores for the rest).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

# `(pred [rows, T], target [rows, T'], mask [rows] bool) -> scalar`
MetricFn = Callable[[Any, Any, Any], Any]


@dataclasses.dataclass(frozen=True)
class Metric:
    """A validation / test score: `fn(pred, target, mask) -> scalar` and its direction.

    Attributes:
      fn: scores one run on one split (see the module docstring for what it is given).
      higher_is_better: True for scores to maximise (AP, accuracy), False for errors.
      on_device: True: `fn` is jittable (`jax.numpy`) and runs on the device; False: it
        gets NumPy arrays on the host.
      name: how `run.json`, the fingerprint and messages name it (default: "custom
        module.function").
    """

    fn: MetricFn
    _: dataclasses.KW_ONLY
    higher_is_better: bool
    on_device: bool = False
    name: str = ""

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"Metric: fn must be a function (pred, target, mask) -> scalar, "
                            f"got {type(self.fn).__name__}")
        for flag in ("higher_is_better", "on_device"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"Metric {flag} must be True or False, got "
                                f"{getattr(self, flag)!r}")
        if not self.name:
            object.__setattr__(self, "name", _custom_name(self.fn))
        _check_signature(self)

    @property
    def mode(self) -> str:
        """"max" or "min": how the metric selects."""
        return "max" if self.higher_is_better else "min"

    def describe(self) -> dict[str, Any]:
        """What `run.json` and the fingerprint keep of a custom metric (JSON)."""
        return {"name": self.name, "higher_is_better": self.higher_is_better,
                "on_device": self.on_device}


def _custom_name(fn: Callable) -> str:
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"custom {module}.{name}"


def _check_signature(metric: Metric) -> None:
    """Refuse a function that cannot be called as `fn(pred, target, mask)`."""
    try:
        signature = inspect.signature(metric.fn)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    try:
        signature.bind(None, None, None)
    except TypeError:
        raise TypeError(f"metric {metric.name}: fn must take (pred, target, mask), its "
                        f"signature is {signature}") from None


def _refuse_unless_scalar(metric: Metric, what: str, shape: Any, dtype: Any) -> None:
    real = dtype is not None and (np.issubdtype(dtype, np.floating)
                                  or np.issubdtype(dtype, np.integer))
    if shape != () or not real:
        raise TypeError(f"metric {metric.name} must return one real number (a scalar), got "
                        f"{what}" + (f" of shape {shape} and dtype {dtype}"
                                     if dtype is not None else ""))


def as_scalar(metric: Metric, value: Any) -> float:
    """`value` as a float, or TypeError naming the metric when it is not one real number."""
    if isinstance(value, (tuple, list, dict)):
        _refuse_unless_scalar(metric, f"a {type(value).__name__}", None, None)
    array = np.asarray(value)
    _refuse_unless_scalar(metric, type(value).__name__, array.shape, array.dtype)
    return float(array)


def check_output(metric: Metric, pred: jax.ShapeDtypeStruct, target: np.ndarray,
                 mask: np.ndarray) -> None:
    """Before any compute: a device metric must trace to a scalar on one batch's shapes
    (`jax.eval_shape`: nothing runs); a host metric that returns on zero predictions for
    that batch's real rows must return a scalar (one that raises there is let through: a
    score may be undefined on one batch)."""
    if metric.on_device:
        spec = [pred, jax.ShapeDtypeStruct(target.shape, target.dtype),
                jax.ShapeDtypeStruct(mask.shape, bool)]
        try:
            out = jax.eval_shape(metric.fn, *spec)
        except Exception as err:  # any failure to trace is the user's function's
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise TypeError(f"metric {metric.name} is on_device but does not trace with "
                            f"jax.numpy ({type(err).__name__}: {first}); write it with "
                            f"jax.numpy, or pass on_device=False for a NumPy metric") from None
        if isinstance(out, jax.ShapeDtypeStruct):
            _refuse_unless_scalar(metric, "an array", out.shape, out.dtype)
        else:
            _refuse_unless_scalar(metric, f"a {type(out).__name__}", None, None)
        return
    real = np.asarray(mask, bool)
    try:
        out = metric.fn(np.zeros((int(real.sum()),) + pred.shape[1:], pred.dtype),
                        np.asarray(target)[real], np.ones(int(real.sum()), bool))
    except Exception:  # noqa: BLE001 -- undefined on this batch; the real split decides
        return
    as_scalar(metric, out)
