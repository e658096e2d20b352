# The two set-up commands of the README. `make setup` prepares a fresh Debian
# machine (virtualenv, package, Docker engine, images); `make test` runs the
# whole suite, Docker tests included.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: setup venv engine images test test-unit test-docker bench gc

setup: venv engine images

venv:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'

engine:
	bash scripts/ensure-docker.sh

images:
	$(BIN)/trialbox --log-level INFO images build

test:
	bash scripts/ensure-docker.sh
	$(BIN)/python -m pytest tests

test-unit:
	$(BIN)/python -m pytest tests/unit

test-docker:
	$(BIN)/python -m pytest tests/docker

bench:
	$(BIN)/python benchmarks/sandbox_lifecycle.py
	$(BIN)/python benchmarks/repo_ready.py
	$(BIN)/python benchmarks/recorded_exec.py

gc:
	$(BIN)/trialbox gc
