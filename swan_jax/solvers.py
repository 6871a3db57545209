"""Integrating the SWAN field with diffrax (docs/conventions.md "Integration", paper Appendix A.1).

`solve(..., solver="euler")` takes `num_layers` forward-Euler steps of size `epsilon`:
exactly the paper's layers `X(l+1) = X(l) + epsilon f(X(l))`. Any other solver
integrates the same field from 0 to `t1 = num_layers * epsilon`: fixed-step solvers
with `dt = epsilon`, adaptive ones from `dt0 = epsilon` under a PID controller.

Fixed steps are taken with the diffrax solver's own `step` in an unrolled `lax.scan`
over the layer times (not `diffeqsolve`): reverse mode then keeps each step's
residuals instead of recomputing steps from checkpoints, which makes the gradient as
cheap as a hand-written loop (benchmarks/solver.py). Adaptive stepping and the
`backsolve` adjoint go through `diffrax.diffeqsolve`, as does a caller's own step-size
controller or `diffrax.SaveAt` (`solve(..., stepsize_controller=, saveat=)`).

The implicit solvers (kvaerno3, kvaerno5) solve each stage by Newton's method with a
Jacobian-free GMRES (`KRYLOV`, one field JVP per Krylov vector); their gradient still
solves with the dense Jacobian of the whole state (optimistix's implicit-function
adjoint), hence a cap on the state (`MAX_IMPLICIT_STATE`), checked at plan time
(`check_implicit_plan`) and while tracing (`check_implicit_size`).

A run-time failure is a `SolverError` that names the settings that fix it (`rtol`,
`max_steps`, `solver`, ...), never a command-line flag: a command line renders the same
error with its flags (`SolverError.render`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import numbers
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
from jax.typing import DTypeLike

from swan_jax.config import SWANConfig
from swan_jax.field import Params, build_operators, check_inputs, field_with_operators
from swan_jax.graph import Graph, gather, is_traced, traced_checks
from swan_jax.settings import HINT, Hint, HintedError, Spelling, check_fields, setting

if TYPE_CHECKING:  # shapes for the type checker and the reader; nothing at run time
    from jaxtyping import Float

Array = jax.Array
Solver = diffrax.AbstractSolver[Any]
Controller = diffrax.AbstractStepSizeController[Any, Any]

FIXED_STEP_SOLVERS: dict[str, Callable[[], Solver]] = {
    "euler": diffrax.Euler,
    "heun": diffrax.Heun,
    "midpoint": diffrax.Midpoint,
    "ralston": diffrax.Ralston,
}
# The linear solve inside each implicit stage's Newton iteration: GMRES, Jacobian-free
# (one field JVP per Krylov vector), where diffrax's default (`VeryChord` with a dense LU)
# materialises the `[n, n]` Jacobian of the whole state from `n` field evaluations and
# reuses it across a step. On transfer line/3 (64 padded rows, 3 layers, kvaerno5) the
# reused Jacobian made the root finds fail and the controller reject half the steps (37
# steps, 18 rejected; Newton + GMRES: 3 steps, none rejected) and the forward solve went
# 30x faster (docs/benchmarks-log.md, "Implicit solvers on a CPU"). Its tolerances only steer
# each Newton step; Newton's own (`rtol`, `atol`: the controller's) decide convergence.
KRYLOV = lx.GMRES(rtol=1e-4, atol=1e-8, restart=20, stagnation_iters=20, max_steps=100)


def _newton_krylov(make: Callable[..., Solver]) -> Callable[[], Solver]:
    """An implicit diffrax solver whose stages are solved by Newton with `KRYLOV` under the
    step-size controller's tolerances (`_root_find_tolerances` sets them for fixed steps)."""
    finder = diffrax.with_stepsize_controller_tols(optx.Newton)(linear_solver=KRYLOV)
    return functools.partial(make, root_finder=finder)


ADAPTIVE_SOLVERS: dict[str, Callable[[], Solver]] = {
    "bosh3": diffrax.Bosh3,
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
    "kvaerno3": _newton_krylov(diffrax.Kvaerno3),  # implicit, for stiff settings
    "kvaerno5": _newton_krylov(diffrax.Kvaerno5),  # implicit, for stiff settings
}
SOLVERS: tuple[str, ...] = tuple(FIXED_STEP_SOLVERS) + tuple(ADAPTIVE_SOLVERS)
ADJOINTS: tuple[str, ...] = ("recursive", "backsolve", "direct")
DEFAULT_MAX_STEPS = 4096
# Layers unrolled per scan iteration: a full unroll for the paper's 5 (LRGB) and 10
# (transfer k = 10) layers, which leaves the scan no residuals to stack. Transfer line
# k = 10 at the CPU protocol (2 seeds, 40 epochs, interleaved runs on the 2-core CPU):
# 0.282-0.298 s per epoch, 0.93-0.98x of the epoch at 8, compiles included in the same
# wall time, the test MSE the same (docs/benchmarks-log.md, "Device-bound training and
# the epoch anatomy"; measured by `python -m benchmarks.epoch_anatomy --only transfer-cpu`).
MAX_UNROLL = 10
ERROR_PREFIX = "swan_jax.solve: "  # marks our run-time messages inside JAX's error text


@dataclasses.dataclass(frozen=True)
class IntegratorConfig:
    """How `solve` integrates, as one frozen object: `SWANBlock(cfg, **integ.options())`,
    `solve(..., cfg, **integ.options())`. Each field is a declared setting
    (`swan_jax.settings`); experiments and their command lines read these declarations.
    """

    solver: str = setting("euler", choices=SOLVERS,
                          help="integrator: euler takes the paper's num_layers steps; any "
                               "other solver integrates the same field to t1 = num_layers * "
                               "epsilon (fixed steps dt = epsilon, or adaptive)")
    rtol: float = setting(1e-3, low=0, low_open=True,
                          help="relative tolerance of adaptive solvers")
    atol: float = setting(1e-6, low=0, low_open=True,
                          help="absolute tolerance of adaptive solvers")
    adjoint: str = setting("recursive", choices=ADJOINTS,
                           help="gradient: recursive (backprop through the steps, "
                                "checkpointed), backsolve (continuous adjoint) or direct")
    max_steps: int | None = setting(None, low=1, since_default=True,
                                    help=f"step budget of adaptive solvers (default "
                                         f"{DEFAULT_MAX_STEPS}); fixed-step solvers take "
                                         f"num_layers steps")

    def __post_init__(self) -> None:
        for name, value in check_fields(self).items():
            object.__setattr__(self, name, value)

    def options(self) -> dict[str, Any]:
        """The keyword arguments of `solve` and `SWANBlock` (solver first)."""
        return dataclasses.asdict(self)


# The integrator's defaults, written once (above): `solve`'s keywords and the blocks'
# fields (`models.SWANBlock`, `nnx.SWANBlock`) take theirs from it.
DEFAULT_INTEGRATOR = IntegratorConfig()


# Implicit solvers (kvaerno3/5) solve their stages Jacobian-free (`KRYLOV`), but their
# gradient does not: optimistix differentiates each stage's root find by the implicit
# function theorem with a dense solve, the `[n, n]` Jacobian of the whole state (`N * d`
# numbers per run) built by `n` evaluations of the field and factorised at `n**3 / 3`
# flops, at every stage of every step (diffrax exposes no other). The cap is the largest
# state whose training epoch stays usable on a 2-core CPU (docs/benchmarks-log.md,
# "Implicit solvers on a CPU", measured by `python -m benchmarks.implicit`): transfer
# line/3 at the default width (64 padded rows x 64 channels); a batch of 64 transfer
# graphs asked for hundreds of GB and never finished an epoch.
MAX_IMPLICIT_STATE = 4096


class SolverTooLarge(HintedError, ValueError):
    """An implicit solver asked for a state too large for its dense Jacobian (raised while
    tracing, before anything is compiled, or by `check_implicit_plan` before any data is
    loaded). Its hints name `batch_size` (a command line: `--batch-size`)."""


IMPLICIT_SOLVERS: tuple[str, ...] = tuple(
    name for name, make in ADAPTIVE_SOLVERS.items()
    if isinstance(make(), diffrax.AbstractImplicitSolver))
PAD_ROWS = 64  # batches pad their nodes to a multiple of this (`data.batching.ROUND_TO`)


def padded_nodes(batch_size: int, largest_graph: int) -> int:
    """At most how many node rows a batch of `batch_size` graphs of up to `largest_graph`
    nodes pads to (+1 padding node, rounded up to `PAD_ROWS`)."""
    return -(-(batch_size * largest_graph + 1) // PAD_ROWS) * PAD_ROWS


def check_implicit_plan(solver: str, *, batch_size: int, largest_graph: int, width: int,
                        what: str) -> None:
    """Refuse, before any data is loaded, an implicit `solver` whose batches (of
    `batch_size` graphs of up to `largest_graph` nodes, `width` channels) exceed
    `MAX_IMPLICIT_STATE`, naming the largest batch size that fits (none: one graph is
    already too large). `what`: the program, for the message."""
    if solver not in IMPLICIT_SOLVERS:
        return
    numbers = padded_nodes(batch_size, largest_graph) * width
    if implicit_fits(numbers):
        return
    fits = max((b for b in range(1, batch_size)
                if implicit_fits(padded_nodes(b, largest_graph) * width)), default=0)
    head = (f"{what}: solver {solver!r} is implicit (its gradient factorises a dense "
            f"Jacobian of the whole state at every stage) and takes states of at most "
            f"{MAX_IMPLICIT_STATE:,} numbers; a batch "
            f"of {batch_size} graph(s) of up to {largest_graph} nodes x {width} channels "
            f"pads to {numbers:,} numbers")
    explicit = "or use an explicit solver ('tsit5', 'dopri5', or the fixed-step 'euler')"
    if fits:
        raise SolverTooLarge(f"{head}: {HINT} fits (slow on a CPU), {explicit}",
                             Hint("batch_size", fits))
    raise SolverTooLarge(f"{head}: even one graph is too large at this width; {HINT}, "
                         f"{explicit}", Hint("hidden", None, "lower {switch}"))


def implicit_fits(num_numbers: int) -> bool:
    """Whether an implicit solver's dense Jacobian of a state this size is practical."""
    return num_numbers <= MAX_IMPLICIT_STATE


def check_implicit_size(name: str, shape: tuple[int, ...], itemsize: int) -> None:
    """Refuse an implicit solver on a state `shape = [N, d]` over `MAX_IMPLICIT_STATE`."""
    n = int(np.prod(shape))
    if implicit_fits(n):
        return
    nodes, width = (shape[0], int(np.prod(shape[1:]))) if len(shape) > 1 else (n, 1)
    gib = n * n * itemsize / 2**30
    raise SolverTooLarge(
        f"solver {name!r} is implicit: its gradient solves with the dense Jacobian of the "
        f"whole state at every stage, "
        f"here {nodes:,} nodes x {width} channels = {n:,} numbers, a [{n:,}, {n:,}] matrix "
        f"({gib:,.1f} GiB per run) built from {n:,} evaluations of the field; implicit "
        f"solvers take states of at most {MAX_IMPLICIT_STATE:,} numbers "
        f"({max(MAX_IMPLICIT_STATE // max(width, 1), 0):,} nodes at this width): use an "
        f"explicit solver ('tsit5', 'dopri5', 'bosh3', or the fixed-step 'euler', 'heun') or "
        f"fewer nodes per batch (a smaller {HINT})", Hint("batch_size", None))


# How a setting (and a suggested value) is written in advice: `settings.Spelling`; a
# spelling that cannot name a setting (None) leaves that advice out.
def python_spelling(setting: str, value: Any = None) -> str:
    """The library's words: a setting by its keyword (`rtol`), a suggested value alone
    (`'kvaerno5'`, after a noun such as "a stiff solver such as")."""
    return setting if value is None else repr(value)


@dataclasses.dataclass(frozen=True)
class Advice:
    """One way out of a solver failure, named by settings (never by command-line flags).

    `verb` and the settings, joined by " / " ("loosen rtol / atol"); or, with `values`,
    `verb`, `noun` and the suggested values of the one setting, joined by " or " ("try a
    stiff solver such as 'kvaerno5'"). `render(spell)` writes it with `spell`.
    """

    verb: str
    settings: tuple[str, ...]
    noun: str = ""
    values: tuple[str, ...] = ()

    def render(self, spell: Spelling = python_spelling) -> str | None:
        """The advice in `spell`'s words, or None when `spell` cannot name a setting."""
        if self.values:
            words = [spell(self.settings[0], v) for v in self.values]
            head, joiner = " ".join(filter(None, (self.verb, self.noun))), " or "
        else:
            words = [spell(name, None) for name in self.settings]
            head, joiner = self.verb, " / "
        return None if None in words else f"{head} {joiner.join(cast(list[str], words))}"


# The ways out `solve` offers.
LOOSEN = Advice("loosen", ("rtol", "atol"))
MORE_STEPS = Advice("raise", ("max_steps",))
TIGHTEN = Advice("tighten", ("rtol", "atol"))
SMALLER_STEPS = Advice("lower", ("epsilon",))
STIFF_SOLVER = Advice("try", ("solver",), "a stiff solver such as", ("kvaerno5",))
# for a state whose dense Jacobian is too large for an implicit solver
EXPLICIT_SOLVER = Advice("try", ("solver",), "a fixed-step solver such as", ("euler", "heun"))


def _one_of(items: list[str]) -> str:
    """'a', 'a or b', 'a, b, or c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + (
        "," if len(items) > 2 else "") + " or " + items[-1]


class SolverError(eqx.EquinoxRuntimeError):
    """An integration failed at run time: the step budget ran out, a fixed implicit step
    failed, or the state became non-finite. Its message (first line) says what to change.

    Structured: `what` (what happened), `advice` (a tuple of `Advice`, the ways out, each
    naming settings), `notes` (context added on the way up, e.g. the program and epoch).
    `str(err)` renders the advice with Python names ("loosen rtol / atol"); a command line
    renders the same error with its flags: `err.render(spell)`.

    A subclass of `equinox.EquinoxRuntimeError`, which it replaces: that one's first
    line is "Above is the stack outside of JIT".
    """

    def __init__(self, what: str, advice: tuple[Advice, ...] = (), *,
                 notes: tuple[str, ...] = ()) -> None:
        if not advice and not notes:  # our own words (e.g. across XLA): their structure
            what, advice, notes = _recover(what)
        self.what, self.advice, self.notes = what, tuple(advice), tuple(notes)
        super().__init__(self.render())

    def __str__(self) -> str:
        return self.render()

    @property
    def settings(self) -> tuple[str, ...]:
        """Every setting the advice names, in order (e.g. rtol, atol, max_steps, solver)."""
        return tuple(dict.fromkeys(name for a in self.advice for name in a.settings))

    def render(self, spell: Spelling = python_spelling) -> str:
        """One line: what happened, the advice `spell` can name, then the notes."""
        ways = [text for a in self.advice if (text := a.render(spell)) is not None]
        text = self.what + (f": {_one_of(ways)}" if ways else "")
        return text + "".join(f" ({note})" for note in self.notes)

    def with_note(self, note: str) -> SolverError:
        """The same failure with `note` (context: which program, which epoch) appended."""
        return SolverError(self.what, self.advice, notes=(*self.notes, note))


# The failures `solve` may raise inside compiled code, by their Python words: only text
# crosses XLA, so `clear_errors` (and a `SolverError` made from its text) finds the
# structure here. Filled while tracing; one entry per distinct failure.
_RAISED: dict[str, tuple[str, tuple[Advice, ...]]] = {}


def _failure(what: str, *advice: Advice) -> str:
    """The run-time message of a failure (marked by `ERROR_PREFIX`), its structure kept."""
    text = SolverError(what, advice).render()
    _RAISED[text] = (what, advice)
    return ERROR_PREFIX + text


def _recover(text: str) -> tuple[str, tuple[Advice, ...], tuple[str, ...]]:
    """(what, advice, notes) of a message `_failure` made, with notes after it in
    parentheses (what `f"{err} (note)"` gives); else the text as it is."""
    for known, (what, advice) in _RAISED.items():
        rest = text[len(known):]
        if text.startswith(known) and (not rest or (rest.startswith(" (")
                                                   and rest.endswith(")"))):
            return what, advice, ((rest[2:-1],) if rest else ())
    return text, (), ()


def _solver_message(text: str) -> str | None:
    """Our message inside the text of an equinox or XLA runtime error, if any."""
    for line in text.splitlines():
        if ERROR_PREFIX in line:
            return line[line.index(ERROR_PREFIX) + len(ERROR_PREFIX):].strip()
    return None


class _OwnCallbackErrors(logging.Filter):
    """Drops JAX's log record of a failed callback when the failure is a SWAN solver
    error: JAX logs it with the callback's traceback and equinox's banner (20 lines)
    before raising it, and `clear_errors` raises it as its one sentence."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        return err is None or _solver_message(str(err)) is None


_CALLBACK_LOG = logging.getLogger("jax._src.callback")
_OWN_CALLBACK_ERRORS = _OwnCallbackErrors()


@contextlib.contextmanager
def clear_errors() -> Iterator[None]:
    """Re-raise SWAN's run-time solver errors as `SolverError` with the message first.

    `solve` does this itself when called outside `jit`. Inside your own `jax.jit` the
    error surfaces when the compiled function runs, wrapped by equinox or XLA; wrap that
    call::

        with sj.solvers.clear_errors():
            out = jitted_step(params, batch)

    Other errors pass through unchanged. Inside the block JAX's log of a callback that
    failed with a SWAN solver error (its traceback) is dropped: the error is raised.
    """
    added = _OWN_CALLBACK_ERRORS not in _CALLBACK_LOG.filters
    if added:
        _CALLBACK_LOG.addFilter(_OWN_CALLBACK_ERRORS)
    try:
        yield
    except (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError) as err:
        message = None if isinstance(err, SolverError) else _solver_message(str(err))
        if message is None:
            raise
        raise SolverError(message) from None
    finally:
        if added:
            _CALLBACK_LOG.removeFilter(_OWN_CALLBACK_ERRORS)


def check_solve_options(rtol: Any, atol: Any, max_steps: Any) -> None:
    """Refuse what the CLI refuses: tolerances must be finite numbers > 0, `max_steps` an
    integer >= 1 (traced tolerances, e.g. under `vmap`, are not checked)."""
    for name, value in (("rtol", rtol), ("atol", atol)):
        if is_traced(value):
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real | np.ndarray | jax.Array):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        # numpy's stubs take no numbers.Real (an ABC, not a type they list)
        if (np.ndim(value) != 0  # type: ignore[arg-type]
                or not (np.isfinite(float(value)) and float(value) > 0)):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if max_steps is not None and (isinstance(max_steps, bool)
                                  or not isinstance(max_steps, numbers.Integral)
                                  or max_steps < 1):
        raise ValueError(f"max_steps must be an integer >= 1 (or None), got {max_steps!r}")


def check_solver_name(solver: str | Solver) -> None:
    """Raise `ValueError` listing the valid names when `solver` is unknown."""
    if isinstance(solver, diffrax.AbstractSolver):
        return
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; valid solvers: {', '.join(SOLVERS)}")


def make_solver(solver: str | Solver) -> tuple[Solver, bool]:
    """The diffrax solver and whether it steps adaptively by default."""
    check_solver_name(solver)
    if isinstance(solver, diffrax.AbstractSolver):
        return solver, False
    if solver in FIXED_STEP_SOLVERS:
        return FIXED_STEP_SOLVERS[solver](), False
    return ADAPTIVE_SOLVERS[solver](), True


def _make_adjoint(adjoint: str, solver: Solver, checkpoints: int | None
                  ) -> diffrax.AbstractAdjoint:
    if adjoint == "recursive":
        return diffrax.RecursiveCheckpointAdjoint(checkpoints=checkpoints)
    if adjoint == "backsolve":  # diffrax leaves BacksolveAdjoint's __init__ unannotated
        return diffrax.BacksolveAdjoint(solver=solver)  # type: ignore[no-untyped-call]
    if adjoint == "direct":
        return diffrax.DirectAdjoint()
    raise ValueError(f"unknown adjoint {adjoint!r}; valid adjoints: {', '.join(ADJOINTS)}")


def _swan_term(t: Any, y: Array, args: tuple[Any, ...]) -> Array:  # t: a scalar of diffrax's
    params, graph, ops, cfg = args
    return field_with_operators(params, graph, y, ops, cfg, t)


def layer_times(cfg: SWANConfig, dtype: DTypeLike = jnp.float32) -> Array:
    """`[L + 1]` times `l * epsilon`, l = 0..L: the layer boundaries."""
    return jnp.arange(cfg.num_layers + 1, dtype=dtype) * jnp.asarray(cfg.epsilon, dtype)


def _fixed_steps(solver: Solver, x0: Array, args: tuple[Any, ...], times: Array,
                 save_trajectory: bool, name: str) -> Array:
    """One `solver.step` per layer interval `[times[l], times[l + 1]]`.

    Returns `[N, d]` at `times[-1]`, or `[L + 1, N, d]` at every time.
    """
    term = diffrax.ODETerm(_swan_term)
    num_steps = times.shape[0] - 1
    state = solver.init(term, times[0], times[1], x0, args)
    implicit = isinstance(solver, diffrax.AbstractImplicitSolver)

    def body(carry: tuple[Array, Any, Array], index: Array
             ) -> tuple[tuple[Array, Any, Array], Any]:  # the state saved, or None
        y, solver_state, ok = carry
        y_next, _, _, solver_state, result = solver.step(
            term, times[index], times[index + 1], y, args, solver_state, made_jump=False)
        ok = ok & (result == diffrax.RESULTS.successful)
        return (y_next, solver_state, ok), (y_next if save_trajectory else None)

    (y, _, ok), trajectory = jax.lax.scan(
        body, (x0, state, jnp.asarray(True)), jnp.arange(num_steps),
        # an implicit step is a root find (a loop of its own): unrolled copies of it only
        # multiply the compile time (kvaerno3 at 50 layers: 10 copies, 40 s on the CPU)
        unroll=1 if implicit else min(num_steps, MAX_UNROLL))
    out = jnp.concatenate([x0[None], trajectory]) if save_trajectory else y
    if not implicit:
        # An explicit step cannot fail (`result` is always successful), and no check keeps
        # the program free of host callbacks, which JAX's persistent compilation cache
        # refuses to store: the training and evaluation programs are reused from it.
        return out
    checked: Array = eqx.error_if(
        out, ~ok, _failure(f"solver {name!r} failed a fixed step (for an implicit solver: its "
                           f"root find did not converge)", SMALLER_STEPS))
    return checked


def solve(
    params: Params,
    graph: Graph,
    x0: Float[Array, "N d"],
    cfg: SWANConfig,
    solver: str | Solver = DEFAULT_INTEGRATOR.solver,
    *,
    rtol: float = DEFAULT_INTEGRATOR.rtol,
    atol: float = DEFAULT_INTEGRATOR.atol,
    adjoint: str = DEFAULT_INTEGRATOR.adjoint,
    adaptive: bool | None = None,
    max_steps: int | None = DEFAULT_INTEGRATOR.max_steps,
    save_trajectory: bool = False,
    check_traced: bool = False,
    stepsize_controller: Controller | None = None,
    saveat: diffrax.SaveAt | None = None,
) -> Any:
    """Integrate SWAN from `x0` over `[0, num_layers * epsilon]`.

    Args:
      params, graph, cfg: as in `vector_field`. A `PreparedGraph` (`prepare_graph`)
        runs the gather-only kernels: the same numbers, and no scatter in the gradient.
      x0: `[N, d]` encoded node states at t = 0 (also what `-learn` operators read).
      solver: a name in `SOLVERS` or any `diffrax.AbstractSolver` instance.
      rtol, atol: tolerances of the PID controller (adaptive stepping only).
      adjoint: `"recursive"` (checkpointed backprop through the adaptive steps; for
        fixed steps, plain backprop through them, as `"direct"`), `"backsolve"`
        (continuous adjoint, via `diffeqsolve` for every solver) or `"direct"`.
      adaptive: override the solver's default stepping (names in
        `ADAPTIVE_SOLVERS` and instances that support it can step adaptively).
      max_steps: step budget of adaptive solvers (default 4096); fixed-step
        solvers take exactly `num_layers` steps (a smaller budget is an error).
      save_trajectory: return the states at every layer time `l * epsilon`.
      check_traced: add `traced_checks` of the graph's indices and `x0`'s finiteness
        (for inputs that are traced, e.g. inside `jit`); run the caller under
        `jax.experimental.checkify.checkify` (or `swan_jax.graph.checked`) to read them.
      stepsize_controller: a diffrax controller instead of the default (a `PIDController`
        of `rtol`, `atol` for adaptive stepping, steps of `dt0 = epsilon` otherwise); the
        integration then goes through `diffrax.diffeqsolve`. An adaptive one
        (`diffrax.AbstractAdaptiveStepSizeController`, e.g. `PIDController(rtol=1e-5,
        atol=1e-7, pcoeff=0.3)`) makes the stepping adaptive (its own tolerances, not
        `rtol` / `atol`); a `diffrax.StepTo(ts)` steps at `ts` (`ts[0] = 0`, `ts[-1] =
        num_layers * epsilon`). Default budget: `max_steps`, else 4096 (adaptive or
        `StepTo`) or `num_layers`.
      saveat: a `diffrax.SaveAt` instead of the final state (or `save_trajectory`'s layer
        times): `solve` then returns diffrax's `solution.ys` as it is, e.g. `[T, N, d]`
        for `SaveAt(ts=ts)` with `T = len(ts)`, `[2, N, d]` for `SaveAt(t0=True,
        t1=True)`, `[max_steps, N, d]` (padded with inf) for `SaveAt(steps=True)`, or
        what `SaveAt(..., fn=...)` makes of each `[N, d]` state. Not with
        `save_trajectory`.

    Returns:
      `[N, d]` state at `t1`, or `[L + 1, N, d]` with `save_trajectory=True`, or
      `solution.ys` with `saveat` (shapes above).

    Raises:
      ValueError: unknown solver or adjoint, bad options or inputs, an adaptive
        controller (or `adaptive=True`) with a solver that only takes fixed steps, or
        `saveat` with `save_trajectory` (all before tracing).
      SolverError: (at run time) the step budget ran out or the state went non-finite;
        inside your own `jit`, wrap the call in `clear_errors()` to get it as such.
    """
    check_inputs(params, graph, x0, cfg)
    check_solve_options(rtol, atol, max_steps)
    if saveat is not None and save_trajectory:
        raise ValueError("pass saveat or save_trajectory=True, not both: save_trajectory is "
                         "saveat=diffrax.SaveAt(ts=layer_times(cfg))")
    if check_traced:
        traced_checks(graph, x0)
    options: dict[str, Any] = dict(
        rtol=rtol, atol=atol, adjoint=adjoint, adaptive=adaptive, max_steps=max_steps,
        save_trajectory=save_trajectory, controller=stepsize_controller, saveat=saveat)
    if is_traced(params, graph, x0, cfg):
        return _solve(params, graph, x0, cfg, solver, **options)
    with clear_errors():  # called eagerly: the run-time errors surface here
        solution = _solve_eagerly(params, graph, x0, cfg, solver, options)
        return jax.block_until_ready(solution)  # type: ignore[no-untyped-call]  # jax: unannotated


def _solve_eagerly(params: Params, graph: Graph, x0: Array, cfg: SWANConfig,
                   solver: str | Solver, options: dict[str, Any]) -> Any:
    """An eager `solve` as one compiled program, cached by its static options.

    Op by op, `_solve` would trace its step loop afresh (a new closure) and compile it
    again on every call, about a second each on a CPU: a notebook or a test calling
    `solve` repeatedly on one graph paid that every time. Options that cannot be hashed
    (a `SaveAt` holding arrays, a solver object holding arrays) take the op-by-op path.
    """
    key = (solver, tuple(sorted(options.items())))
    try:
        hash(key)
    except TypeError:
        return _solve(params, graph, x0, cfg, solver, **options)
    return _solve_compiled(params, graph, x0, cfg, key)


@functools.partial(jax.jit, static_argnums=4)
def _solve_compiled(params: Params, graph: Graph, x0: Array, cfg: SWANConfig,
                    key: tuple[Any, ...]) -> Any:
    solver, options = key[0], dict(key[1])
    return _solve(params, graph, x0, cfg, solver, **options)


def _is_adaptive(controller: Controller | None) -> bool:
    """Whether a controller chooses its steps from error estimates (also when clipped)."""
    inner = getattr(controller, "controller", controller)  # ClipStepSizeController
    return isinstance(inner, diffrax.AbstractAdaptiveStepSizeController)


def _stepping(solver: str | Solver, diffrax_solver: Solver, default_adaptive: bool,
              adaptive: bool | None, controller: Controller | None, name: str) -> bool:
    """Whether the solve steps adaptively; refuses an adaptive controller (or
    `adaptive=True`) with a solver that takes fixed steps, before anything is traced."""
    wants = _is_adaptive(controller)
    if controller is not None and adaptive is not None and adaptive != wants:
        raise ValueError(f"adaptive={adaptive} contradicts stepsize_controller="
                         f"{type(controller).__name__}; leave adaptive unset")
    adaptive = (wants if controller is not None else
                default_adaptive if adaptive is None else adaptive)
    fixed_only = (solver in FIXED_STEP_SOLVERS if isinstance(solver, str)
                  else not isinstance(diffrax_solver, diffrax.AbstractAdaptiveSolver))
    if adaptive and fixed_only:
        asked = (f"stepsize_controller={type(controller).__name__} is adaptive"
                 if controller is not None else "adaptive=True")
        raise ValueError(f"{asked}, but solver {name!r} takes fixed steps (it has no error "
                         f"estimate to adapt them): use an adaptive solver "
                         f"({', '.join(ADAPTIVE_SOLVERS)}) or diffrax.ConstantStepSize()")
    return adaptive


def _root_find_tolerances(solver: diffrax.AbstractImplicitSolver[Any], rtol: float,
                          atol: float) -> diffrax.AbstractImplicitSolver[Any]:
    """An implicit solver whose root finder takes `rtol`, `atol` (and the RMS norm, as
    diffrax's PID controller does) where it would take them from an adaptive step-size
    controller: with fixed steps there is none, and diffrax stops with an error (or, in
    our own step loop, a TypeError) instead. Tolerances the caller set stay."""
    finder = solver.root_finder
    unset = [a for a in ("rtol", "atol", "norm")
             if type(getattr(finder, a, None)).__name__ == "_UseStepSizeTol"]
    if not unset:
        return solver
    given = {"rtol": rtol, "atol": atol, "norm": diffrax.PIDController(rtol=rtol, atol=atol).norm}
    tuned: diffrax.AbstractImplicitSolver[Any] = eqx.tree_at(
        lambda s: tuple(getattr(s.root_finder, a) for a in unset), solver,
        tuple(given[a] for a in unset))
    return tuned


def _check_one_float_dtype(name: str, params: Params, x0: Array) -> None:
    """Refuse parameters of another float dtype than the state for the continuous adjoint
    of an implicit solver: its root find linearises state and parameter cotangents as one
    vector, which lineax refuses with a traceback ("unravel function given array of dtype
    float32, but expected dtype float64")."""
    other = sorted({str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(params)
                    if jnp.issubdtype(leaf.dtype, jnp.floating)} - {str(x0.dtype)})
    if other:
        raise ValueError(
            f"adjoint 'backsolve' with the implicit solver {name!r} needs the parameters in "
            f"the state's dtype {x0.dtype}, but they hold {', '.join(other)}: cast them "
            f"(jax.tree_util.tree_map(lambda a: a.astype(x0.dtype), params)) or use adjoint "
            f"'recursive' or 'direct'")


def _solve(params: Params, graph: Graph, x0: Array, cfg: SWANConfig, solver: str | Solver,
           *, rtol: float, atol: float, adjoint: str, adaptive: bool | None,
           max_steps: int | None, save_trajectory: bool, controller: Controller | None,
           saveat: diffrax.SaveAt | None) -> Any:
    diffrax_solver, default_adaptive = make_solver(solver)
    if adjoint not in ADJOINTS:
        raise ValueError(f"unknown adjoint {adjoint!r}; valid adjoints: {', '.join(ADJOINTS)}")
    name = solver if isinstance(solver, str) else type(solver).__name__
    adaptive = _stepping(solver, diffrax_solver, default_adaptive, adaptive, controller, name)
    # Stored once: else XLA recomputes an encoder's output (e.g. nine embedding lookups)
    # inside each of its consumers.
    x0 = gather.materialize(x0)
    ops = build_operators(params, graph, x0, cfg)
    times = layer_times(cfg, x0.dtype)
    if isinstance(diffrax_solver, diffrax.AbstractImplicitSolver):  # shapes are static here
        check_implicit_size(name, x0.shape, x0.dtype.itemsize)
        if not adaptive:
            diffrax_solver = _root_find_tolerances(diffrax_solver, rtol, atol)
        if adjoint == "backsolve":
            _check_one_float_dtype(name, params, x0)
    layer_steps = not adaptive and controller is None
    if layer_steps and max_steps is not None and max_steps < cfg.num_layers:
        raise ValueError(f"max_steps={max_steps} is below num_layers={cfg.num_layers}: a "
                         f"fixed-step solver takes exactly num_layers steps")
    args = (params, graph, ops, cfg)
    if layer_steps and saveat is None and adjoint != "backsolve":
        # Discrete backprop through the steps ("recursive" and "direct" alike).
        return _fixed_steps(diffrax_solver, x0, args, times, save_trajectory, name)
    if controller is None:
        controller = (diffrax.PIDController(rtol=rtol, atol=atol) if adaptive
                      else diffrax.ConstantStepSize())
    if max_steps is None:
        layers = isinstance(controller, diffrax.ConstantStepSize)
        max_steps = cfg.num_layers if layers else DEFAULT_MAX_STEPS
    custom_saveat = saveat is not None
    if saveat is None:
        saveat = diffrax.SaveAt(ts=times) if save_trajectory else diffrax.SaveAt(t1=True)
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(_swan_term), diffrax_solver, t0=times[0], t1=times[-1],
        dt0=None if isinstance(controller, diffrax.StepTo) else times[1], y0=x0, args=args,
        saveat=saveat, stepsize_controller=controller,
        adjoint=_make_adjoint(adjoint, diffrax_solver, None if adaptive else max_steps),
        max_steps=max_steps, throw=False)
    ys = _checked(solution, name, max_steps, implicit_fits(x0.size))
    return ys if save_trajectory or custom_saveat else ys[-1]


def _checked(solution: diffrax.Solution, name: str, max_steps: int, implicit_ok: bool
             ) -> Any:
    """`solution.ys`, failing at run time (`SolverError`, through `clear_errors`) when the
    budget ran out or the integration failed; the advice names only what can run on
    this state (an implicit solver's dense Jacobian may not fit: `implicit_fits`)."""
    ys = eqx.error_if(
        solution.ys, solution.result == diffrax.RESULTS.max_steps_reached,
        _failure(f"solver {name!r} used its whole budget of max_steps={max_steps} steps "
                 f"before t1 = num_layers * epsilon", LOOSEN, MORE_STEPS,
                 STIFF_SOLVER if implicit_ok else EXPLICIT_SOLVER))
    return eqx.error_if(
        ys, solution.result != diffrax.RESULTS.successful,
        _failure(f"solver {name!r} failed to integrate the SWAN field (non-finite state or "
                 f"a failed implicit step)", SMALLER_STEPS, TIGHTEN))
