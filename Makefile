# swan-jax: every user-facing command. `make test` builds .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEVICE ?= cpu
# Peptides raw files: ../shared/data when it exists, else data/ (overridable).
SWAN_DATA_DIR ?= $(shell if [ -d ../shared/data ]; then echo ../shared/data; else echo data; fi)
export SWAN_DATA_DIR

EXTRAS := test
ifeq ($(DEVICE),cuda12)
EXTRAS := test,cuda12
endif

.PHONY: install test lint reproduce-lrgb reproduce-transfer reproduce-graphprop bench clean

$(VENV)/.installed-$(DEVICE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(VENV)/.installed-$(DEVICE)

test: install
	$(PY) -m pytest -q -n 2 tests

lint: install
	$(VENV)/bin/ruff check swan_jax experiments tests benchmarks

reproduce-lrgb: install
	@echo "make reproduce-lrgb: coming with the LRGB issue"; exit 1

reproduce-transfer: install
	@echo "make reproduce-transfer: coming with the graph-transfer issue"; exit 1

reproduce-graphprop: install
	@echo "make reproduce-graphprop: coming with the graph-property issue"; exit 1

clean:
	rm -rf $(VENV) .pytest_cache
