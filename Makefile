# swan-jax: every user-facing command. `make test` builds .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEVICE ?= cpu
# Peptides raw files: ../shared/data when it exists, else data/ (overridable).
SWAN_DATA_DIR ?= $(shell if [ -d ../shared/data ]; then echo ../shared/data; else echo data; fi)
export SWAN_DATA_DIR

# DEVICE: cpu (default; with the test tools), cuda12 or cuda13 (jax's GPU build for that
# CUDA major version, see `nvidia-smi`; without the test tools: `make test` adds them).
DEVICES := cpu cuda12 cuda13
ifeq ($(filter $(DEVICE),$(DEVICES)),)
$(error DEVICE=$(DEVICE) is not one of: $(DEVICES) (e.g. make install DEVICE=cuda13))
endif
EXTRAS_cpu := test,chem
EXTRAS_cuda12 := chem,cuda12
EXTRAS_cuda13 := chem,cuda13
EXTRAS := $(EXTRAS_$(DEVICE))
TEST_TOOLS := $(if $(filter cpu,$(DEVICE)),,$(VENV)/.installed-test)

.PHONY: install test lint typecheck docs bench gpu-check gpu-check-smoke reproduce-lrgb reproduce-lrgb-grid reproduce-transfer reproduce-graphprop reproduce-tolokers curves results campaign clean

# Packages go in with uv (itself from PyPI, into the environment), else with pip (when uv
# cannot be installed or cannot install them): uv downloads in parallel and compiles the
# bytecode on every core. A fresh environment on 2 cores: 33-35 s against pip's 55-66 s
# (2026-11-27). Bytecode is compiled at install because environments that set
# PYTHONDONTWRITEBYTECODE never cache it later.
install_packages = ($(PY) -m pip install -q uv >/dev/null 2>&1 && \
	$(PY) -m uv pip install -q --python $(PY) --compile-bytecode $(1)) || \
	$(PY) -m pip install -q $(1)

$(VENV)/.installed-$(DEVICE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(call install_packages,-e ".[$(EXTRAS)]")
	touch $@

install: $(VENV)/.installed-$(DEVICE)

$(VENV)/.installed-test: pyproject.toml
	$(call install_packages,-e ".[test]")
	touch $@

# worksteal: an idle worker takes queued tests from the busy one, so the few long
# end-to-end tests do not leave one core idle at the end (12.3 min against 14.0 here).
test: install $(TEST_TOOLS)
	$(PY) -m pytest -q -n 2 --dist worksteal tests

# A real single-node SLURM on 127.0.0.1 (slurm-wlm and munge from apt when missing: root),
# two campaign cells submitted with --executor slurm, checked against a local run; every
# daemon stopped on exit (tests/cluster/run.sh). About 2 minutes with the packages there.
.PHONY: test-cluster
test-cluster: install $(TEST_TOOLS)
	PY=$(PY) bash tests/cluster/run.sh

# ruff, then the type checker (`make typecheck`).
lint: install $(TEST_TOOLS)
	$(VENV)/bin/ruff check swan_jax reproduce reproductions experiments tests benchmarks
	$(PY) -m mypy

# mypy over swan_jax/ as pyproject.toml's [tool.mypy] says: strict on the public API (what
# swan_jax/__init__.py exports, the public subpackages' __init__), the default rules
# elsewhere. Its cache is .mypy_cache/ (git-ignored): a second run rechecks what changed.
typecheck: install $(TEST_TOOLS)
	$(PY) -m mypy

# The documentation, offline, into docs/_build/ (git-ignored; open docs/_build/index.html):
# the API reference of the public package (pdoc), the notebooks executed to HTML the way the
# tests run them (their outputs never reach git), README and docs/*.md (docs/build.py).
docs: install $(TEST_TOOLS)
	$(PY) docs/build.py

# Five benchmarks -> benchmarks/results/*.json, benchmarks/figures/benchmarks.png and the
# table in BENCHMARKS.md (about 10 minutes on 2 CPU cores), then the epoch anatomy of both
# training pipelines -> benchmarks/results/epoch_anatomy.json. BENCH_FLAGS=--quick for a look.
BENCH_FLAGS ?=
bench: install
	$(PY) -m benchmarks.run_all $(BENCH_FLAGS)
	$(PY) -m benchmarks.epoch_anatomy $(if $(findstring --quick,$(BENCH_FLAGS)),--quick)

# Is the GPU used? Prints the devices, times one SWAN training step and one epoch on toy
# graphs, and fails when the training did not run on a GPU (after make install DEVICE=cuda13).
gpu-check: install
	$(PY) -m swan_jax.experiments.gpu_check --require-gpu

# The GPU check (benchmarks/gpu_check.sh, for a GPU machine: see BENCHMARKS.md), as a short
# CPU run that exercises every part of it.
gpu-check-smoke: install
	GPU_CHECK_SMOKE=1 OUT=runs/gpu_smoke bash benchmarks/gpu_check.sh

# Short CPU versions: make reproduce-lrgb EPOCHS=3 SEEDS=0 (empty = the paper's protocol).
# A data set that is absent and cannot be downloaded is left out, one line saying what is
# missing and how to get it, and its cells are marked "not run: data unavailable" in
# table.md (--skip-missing); the target fails only when nothing could run. STRICT=1
# refuses any missing data before training instead (as the command line does without
# --skip-missing). The protocols are swan_jax/experiments/configs/.
EPOCHS ?=
SEEDS ?=
STRICT ?=
# Every target resumes its results folder; one written with other settings is refused
# (naming them): OVERWRITE=1 starts it again with these settings instead.
OVERWRITE ?=
RUN_FLAGS = $(if $(EPOCHS),--epochs $(EPOCHS)) $(if $(SEEDS),--seeds $(SEEDS)) \
	$(if $(STRICT),,--skip-missing) $(if $(OVERWRITE),--overwrite,--resume)

# QUICK=1: a first table in minutes on a CPU (configs/lrgb-quick.toml: Peptides-func's
# first 1,000 molecules, 15 epochs, 1 seed; every number marked as not the paper's
# protocol) -> results/lrgb-quick/. About 5 minutes on 2 CPU cores, featurisation
# included (BENCHMARKS.md).
QUICK ?=
LRGB_CELLS = $(if $(QUICK),--config swan_jax/experiments/configs/lrgb-quick.toml,--all)

reproduce-lrgb: install
	$(PY) experiments/lrgb.py $(LRGB_CELLS) --data-dir $(SWAN_DATA_DIR) $(RUN_FLAGS)

reproduce-lrgb-grid: install
	$(PY) experiments/lrgb.py --all --grid full --data-dir $(SWAN_DATA_DIR) $(RUN_FLAGS)

# PROTOCOL=cpu: the CPU-sized protocols behind RESULTS.md (configs/*-cpu.toml, each
# departure from the paper's protocol written at its top); empty: the paper's.
PROTOCOL ?=
CELLS = $(if $(PROTOCOL),--config swan_jax/experiments/configs/$(1)-$(PROTOCOL).toml,--all)

reproduce-transfer: install
	$(PY) experiments/transfer.py $(call CELLS,transfer) $(RUN_FLAGS)

reproduce-graphprop: install
	$(PY) experiments/graphprop.py $(call CELLS,graphprop) $(RUN_FLAGS)

# The paper's scalability table on Tolokers: GCN, SWAN, SWAN-learn, full batch, the 10
# official splits pooled; ROC AUC and ms per epoch -> results/tolokers/. SPLITS=0,1 runs
# fewer splits (the table says so).
SPLITS ?=
reproduce-tolokers: install
	$(PY) experiments/node_classification.py --dataset tolokers --data-dir $(SWAN_DATA_DIR) \
		$(if $(SPLITS),--splits $(SPLITS)) $(RUN_FLAGS)

# Training curves of every program of a results folder: make curves RESULTS=results/lrgb
RESULTS ?= results
curves: install
	$(PY) -m swan_jax.experiments.curves $(RESULTS)

# RESULTS.md (and reproductions/figures/) from the committed reproductions/ only, by the
# repository's own tooling reproduce/ (not installed). Add a finished or partial run
# first: python -m reproduce.results collect results/transfer
results: install
	$(PY) -m reproduce.results render

# The reproduction campaign (reproductions/campaign/plan.toml): the cells matching CAMPAIGN_CELLS
# (default: those sized for a CPU), in their declared priority, each by its experiment's
# own command with --resume, until UNTIL (HH:MM or minutes; default 60); finished cells
# collected, unfinished ones carried in reproductions/campaign/carried/, RESULTS.md
# re-rendered. Then commit reproductions/ and RESULTS.md. A GPU window:
# reproduce/gpu_slice.sh. CAMPAIGN_FLAGS: e.g. --executor slurm --slurm-config FILE.
UNTIL ?= 60
CAMPAIGN_CELLS ?= graphprop/*/gcn graphprop-control/* graphprop-screen/*/graphcon \
	graphprop-screen/*/adgn graphprop/*/graphcon graphprop/*/adgn runtime/* \
	transfer/*/10/gps transfer/line/50/gin transfer/line/50/sage
CAMPAIGN_FLAGS ?=
campaign: install
	$(PY) -m reproduce.campaign run --until $(UNTIL) \
		$(foreach c,$(CAMPAIGN_CELLS),--cells '$(c)') $(CAMPAIGN_FLAGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
