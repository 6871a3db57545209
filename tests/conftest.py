"""Fixtures shared by the test modules."""

import os

# XLA's CPU backend emits each fusion with its MLIR fusion emitters by default; its older
# LLVM emitters compile the suite's programs about a third faster (the tiny transfer
# `train()` call: 3.6-3.9 s against 5.7-6.7 s; test_gather plus test_core on 2 cores:
# 236 s against 332 s). These programs run a few steps on tiny graphs, so compiling is
# what costs. IEEE arithmetic is kept either way, and every exactness test compares two
# programs compiled alike. The older path expands scatters into loops, so a test that
# reads compiled HLO compiles with the emitters users get (`PRODUCTION_COMPILE`).
# Set here, before JAX starts its backend; subprocesses inherit it. An explicit
# xla_cpu_use_fusion_emitters in XLA_FLAGS is kept.
FUSION_EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters"
_flags = os.environ.get("XLA_FLAGS", "")
if FUSION_EMITTERS_FLAG not in _flags:
    os.environ["XLA_FLAGS"] = f"{_flags} {FUSION_EMITTERS_FLAG}=false".strip()
PRODUCTION_COMPILE = {"xla_cpu_use_fusion_emitters": True}

import jax  # noqa: E402  (after XLA_FLAGS)
import pytest  # noqa: E402


@pytest.fixture
def x64():
    """Run the test in float64 (docs/conventions.md's exactness checks need it)."""
    with jax.enable_x64(True):
        yield


# Test programs are compiled with XLA's cheap optimisation level
# (`jax_disable_most_optimizations`: LLVM at -O0, no expensive passes). Compiling is most
# of the suite's time on a CPU, and these programs run a few steps on tiny graphs, so
# optimising them costs more than it saves (about 30% less compile time per program,
# measured on the solver programs of test_gather). It changes no semantics: XLA's CPU
# backend keeps IEEE arithmetic at every level (no fast-math), and every exactness test
# compares two programs compiled alike. Subprocesses (scripts, notebook kernels) inherit
# it through the environment; an explicit JAX_DISABLE_MOST_OPTIMIZATIONS=0 turns it off.
CHEAP_COMPILES = os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
jax.config.update("jax_disable_most_optimizations", CHEAP_COMPILES == "1")


@pytest.fixture(scope="session")
def readme_example_run():
    """README.md's byod example, run once per test process: its namespace and what it
    printed. tests/test_byod.py checks that run; tests/test_docs.py continues it with
    docs/own-data.md's example (in a copy of the namespace), so the README's training is
    paid once, not once per test. It writes no file (no checkpoint folder)."""
    import contextlib
    import io

    from tests.test_byod import readme_example

    namespace: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(readme_example(), "README.md:byod-example", "exec"), namespace)
    return namespace, printed.getvalue()


@pytest.fixture(autouse=True, scope="session")
def _compiled_programs_are_reused_within_the_session(tmp_path_factory):
    """JAX's persistent compilation cache in one folder of this test session (empty at
    its start, so a fresh clone's `make test` pays every first compile): a program
    compiled again, bit for bit the same (a resumed run, the tiny transfer run many tests
    train), by this process, the other xdist worker or a subprocess (scripts, notebook
    kernels inherit the folder), is read back instead. A size bound turns on the cache's
    file lock (`filelock`), so that the processes sharing the folder never read an entry
    while it is written."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "jax-compilation-cache"
    folder.mkdir(exist_ok=True)
    settings = {"jax_compilation_cache_dir": str(folder),
                "jax_persistent_cache_min_compile_time_secs": 0.1,
                "jax_compilation_cache_max_size": 16 * 2**30}
    for name, value in settings.items():
        jax.config.update(name, value)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in settings.items():
            mp.setenv(name.upper(), str(value))
        yield


@pytest.fixture(autouse=True, scope="session")
def _downloads_never_go_to_the_home_folder(tmp_path_factory):
    """Loaders download into env SWAN_DOWNLOAD_DIR (default ~/.cache/swan-jax) and cache
    into SWAN_CACHE_DIR (default ~/.cache/swan-jax/processed): in tests, session temp
    folders (subprocesses inherit them). Nothing downloads from the internet in
    tests; this only keeps local-server downloads out of the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWAN_DOWNLOAD_DIR", str(tmp_path_factory.mktemp("downloads")))
        mp.setenv("SWAN_DOWNLOAD_RETRIES", "0")  # a failing stub is asked once, no pauses
        # the processed-data cache defaults to the user cache folder: a temp one in tests
        mp.setenv("SWAN_CACHE_DIR", str(tmp_path_factory.mktemp("processed")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_internet_in_tests():
    """Nothing may download during tests: `requests.get` (what `download.fetch` uses,
    through pooch) and `urllib.request.urlopen` reach only this machine; any other host
    fails as an unreachable network."""
    import urllib.error
    import urllib.parse
    import urllib.request

    import requests

    real = urllib.request.urlopen
    real_get = requests.get

    def local_get(url, *args, **kwargs):
        if urllib.parse.urlsplit(str(url)).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise requests.exceptions.ConnectionError(f"network disabled in tests ({url})")
        return real_get(url, *args, **kwargs)

    def local_only(url, *args, **kwargs):
        full = url.full_url if isinstance(url, urllib.request.Request) else str(url)
        if urllib.parse.urlsplit(full).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise urllib.error.URLError(f"network disabled in tests ({full})")
        return real(url, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(urllib.request, "urlopen", local_only)
        mp.setattr(requests, "get", local_get)
        yield


@pytest.fixture(autouse=True)
def _signal_handlers_put_back():
    """A test that runs a command in this process installs the command's SIGINT / SIGTERM
    handlers (`experiments.signals`, the campaign's); put the previous ones back, so that
    no later test inherits a handler that only records a Ctrl-C."""
    import signal

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        if handler is not None:
            signal.signal(sig, handler)
