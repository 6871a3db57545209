"""Count JAX traces and XLA compilations, e.g. to check that an epoch compiles nothing.

    with CompileCounter() as counter:
        ...                       # anything that may call jitted functions
    counter.compiles, counter.traces, counter.seconds

Padded batches of one budget keep every step's shapes static, so after the first
epoch a training run should trace and compile nothing (benchmark 4, and a test).
"""

from __future__ import annotations

import jax

_COMPILE = "/jax/core/compile/backend_compile_duration"
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"


class CompileCounter:
    """Counts compilation events of JAX's monitoring hooks while the context is open."""

    def __init__(self) -> None:
        self.compiles = 0
        self.traces = 0
        self.compiled: list[str] = []  # names of the compiled functions, in order
        self.traced: list[str] = []  # names of the traced functions, in order
        # wall seconds spent tracing, lowering and compiling (one after another in the
        # calling thread): what a pace measured on the clock leaves out (`train`'s progress)
        self.seconds = 0.0

    def _listen(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event in (_COMPILE, _TRACE, _LOWER):
            self.seconds += duration_secs
        if event == _COMPILE:
            self.compiles += 1
            self.compiled.append(str(kwargs.get("fun_name", "?")))
        elif event == _TRACE:
            self.traces += 1
            self.traced.append(str(kwargs.get("fun_name", "?")))

    def __enter__(self) -> CompileCounter:
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc: object) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)

    def snapshot(self) -> dict[str, int]:
        return {"compiles": self.compiles, "traces": self.traces}
